package io.aeronio.spark;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.util.MathUtils;
import org.apache.spark.sql.catalyst.util.SQLOrderingUtil;
import org.apache.spark.sql.connector.expressions.Expression;
import org.apache.spark.sql.connector.expressions.NamedReference;
import org.apache.spark.sql.connector.expressions.aggregate.AggregateFunc;
import org.apache.spark.sql.connector.expressions.aggregate.Aggregation;
import org.apache.spark.sql.connector.expressions.aggregate.Count;
import org.apache.spark.sql.connector.expressions.aggregate.CountStar;
import org.apache.spark.sql.connector.expressions.aggregate.Max;
import org.apache.spark.sql.connector.expressions.aggregate.Min;
import org.apache.spark.sql.connector.expressions.aggregate.Sum;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.types.ByteType$;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DoubleType$;
import org.apache.spark.sql.types.FloatType$;
import org.apache.spark.sql.types.IntegerType$;
import org.apache.spark.sql.types.LongType$;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.ShortType$;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * An aggregation pushed into the scan (layout fixed): each partition's reader aggregates its
 * records where they lie and hands Spark one row per group, which Spark merges across partitions
 * as it merges its own partial aggregates.
 *
 * <h2>What is pushed</h2>
 * GROUP BY nothing or one column: a record field of byte, short, int or long, or recording_id,
 * session_id or stream_id. COUNT(*), COUNT(column), SUM, MIN and MAX of numeric record fields
 * (not boolean), none DISTINCT; AVG reaches here as Spark's SUM / COUNT of its column, and is
 * refused over an integral column (Spark's own AVG sums it as doubles, which past 2^53 rounds
 * otherwise than a long sum does), as is any SUM and COUNT of one integral column. Anything else
 * is refused and Spark aggregates the rows itself, as it does when a filter stays above the scan
 * (every filter does: Filters) or option push_down_aggregates is false.
 *
 * <h2>The same values as Spark's</h2>
 * Spark's partial aggregation, per partition, in the order the rows are read: SUM of integral
 * columns in long (with spark.sql.ansi.enabled an overflow fails as Spark's does, else it wraps),
 * of float and double in double; MIN and MAX in Spark's order (NaN above all, -0.0 equal to 0.0,
 * the first of equals kept); COUNT in long. Spark merges the partitions' rows (COUNT as the SUM
 * of counts). Without GROUP BY every partition gives one row, empty ones too, and a read of no
 * partition one empty partition, so that COUNT is 0 and the rest NULL, as over no rows.
 */
final class Aggregates {
  private static final Set<String> CONSTANT_KEYS = Set.of("recording_id", "session_id", "stream_id");

  private Aggregates() {}

  /** A value's kind: how it is read from a record and boxed for Spark. */
  enum Kind {
    BYTE(1), SHORT(2), INT(4), LONG(8), FLOAT(4), DOUBLE(8);

    final int width;

    Kind(int width) {
      this.width = width;
    }

    boolean integral() {
      return this != FLOAT && this != DOUBLE;
    }

    static Kind of(DataType type) {
      if (type.equals(ByteType$.MODULE$)) return BYTE;
      if (type.equals(ShortType$.MODULE$)) return SHORT;
      if (type.equals(IntegerType$.MODULE$)) return INT;
      if (type.equals(LongType$.MODULE$)) return LONG;
      if (type.equals(FloatType$.MODULE$)) return FLOAT;
      if (type.equals(DoubleType$.MODULE$)) return DOUBLE;
      return null; // boolean, or not a record's
    }

    DataType type() {
      return switch (this) {
        case BYTE -> ByteType$.MODULE$;
        case SHORT -> ShortType$.MODULE$;
        case INT -> IntegerType$.MODULE$;
        case LONG -> LongType$.MODULE$;
        case FLOAT -> FloatType$.MODULE$;
        case DOUBLE -> DoubleType$.MODULE$;
      };
    }

    /** An integral field at `address`, as long. */
    long integral(long address) {
      return switch (this) {
        case BYTE -> Mapped.getByte(null, address);
        case SHORT -> Mapped.getShort(null, address);
        case INT -> Mapped.getInt(null, address);
        default -> Mapped.getLong(null, address);
      };
    }

    /** A float or double field at `address`, as double. */
    double floating(long address) {
      return this == FLOAT
          ? Float.intBitsToFloat(Mapped.getInt(null, address))
          : Double.longBitsToDouble(Mapped.getLong(null, address));
    }

    /** A value kept as long (integral) or as a double's bits, boxed as Spark's type. */
    Object box(long value) {
      return switch (this) {
        case BYTE -> (byte) value;
        case SHORT -> (short) value;
        case INT -> (int) value;
        case LONG -> value;
        case FLOAT -> (float) Double.longBitsToDouble(value);
        case DOUBLE -> Double.longBitsToDouble(value);
      };
    }
  }

  enum Op {
    COUNT, SUM, MIN, MAX
  }

  /** One aggregate: its operation over the record field at `offset` (COUNT: none). */
  record Function(Op op, int offset, Kind kind) implements java.io.Serializable {}

  /**
   * What a partition's reader computes: the group key (`keyName` null: none; `keyOffset` -1: a
   * metadata column, constant in a partition) and the functions; `schema` is its rows'.
   */
  record Plan(
      String keyName, int keyOffset, Kind keyKind, Function[] functions, boolean ansi,
      StructType schema, String describe)
      implements java.io.Serializable {}

  /**
   * The plan for `aggregation` over a fixed layout's `columns` (record fields at `offsets`,
   * `metadata` the metadata columns), or null when it is not pushed (the class's rules).
   */
  static Plan of(
      Aggregation aggregation, StructType columns, Map<String, Integer> offsets,
      Set<String> metadata, boolean ansi) {
    Expression[] groups = aggregation.groupByExpressions();
    if (groups.length > 1) {
      return null;
    }
    List<StructField> out = new ArrayList<>();
    String keyName = null;
    int keyOffset = -1;
    Kind keyKind = null;
    if (groups.length == 1) {
      keyName = column(groups[0]);
      if (keyName == null || !columns.getFieldIndex(keyName).isDefined()) {
        return null;
      }
      keyKind = Kind.of(columns.apply(keyName).dataType());
      if (keyKind == null || !keyKind.integral()) {
        return null;
      }
      if (metadata.contains(keyName)) {
        if (!CONSTANT_KEYS.contains(keyName)) {
          return null;
        }
      } else {
        keyOffset = offsets.get(keyName);
      }
      out.add(new StructField(keyName, keyKind.type(), false, Metadata.empty()));
    }
    AggregateFunc[] given = aggregation.aggregateExpressions();
    Function[] functions = new Function[given.length];
    Set<String> summed = new HashSet<>(), counted = new HashSet<>();
    for (int i = 0; i < given.length; i++) {
      AggregateFunc f = given[i];
      Op op;
      Expression input = null;
      if (f instanceof CountStar) {
        op = Op.COUNT;
      } else if (f instanceof Count c && !c.isDistinct()) {
        op = Op.COUNT;
        input = c.column();
      } else if (f instanceof Sum s && !s.isDistinct()) {
        op = Op.SUM;
        input = s.column();
      } else if (f instanceof Min m) {
        op = Op.MIN;
        input = m.column();
      } else if (f instanceof Max m) {
        op = Op.MAX;
        input = m.column();
      } else {
        return null;
      }
      int offset = -1;
      Kind kind = null;
      if (input != null) {
        String name = column(input);
        Integer at = name == null || metadata.contains(name) ? null : offsets.get(name);
        if (at == null || !columns.getFieldIndex(name).isDefined()) {
          return null;
        }
        kind = Kind.of(columns.apply(name).dataType());
        if (kind == null) {
          return null;
        }
        offset = op == Op.COUNT ? -1 : at; // no nulls: COUNT(column) is COUNT(*)
        if (kind.integral() && op == Op.SUM) {
          summed.add(name);
        } else if (kind.integral() && op == Op.COUNT) {
          counted.add(name);
        }
      }
      DataType type =
          switch (op) {
            case COUNT -> LongType$.MODULE$;
            case SUM -> kind.integral() ? LongType$.MODULE$ : DoubleType$.MODULE$;
            case MIN, MAX -> kind.type();
          };
      functions[i] = new Function(op, offset, op == Op.COUNT ? null : kind);
      out.add(new StructField("agg" + i, type, true, Metadata.empty()));
    }
    summed.retainAll(counted);
    if (!summed.isEmpty()) {
      return null; // maybe an AVG of an integral column
    }
    String text =
        Arrays.stream(given).map(Object::toString).collect(Collectors.joining(", "))
            + (keyName == null ? "" : " GROUP BY " + keyName);
    return new Plan(
        keyName, keyOffset, keyKind, functions, ansi,
        new StructType(out.toArray(new StructField[0])), text);
  }

  /** The column an expression names, or null when it is not a plain column. */
  private static String column(Expression e) {
    if (e instanceof NamedReference ref && ref.fieldNames().length == 1) {
      return ref.fieldNames()[0];
    }
    return null;
  }

  /** The scan's batch: the read's partitions (one empty one for a global aggregate of none). */
  record Read(Plan plan, ReadPlan read) implements Batch {
    @Override
    public InputPartition[] planInputPartitions() {
      if (read.parts.isEmpty() && plan.keyName() == null) {
        return new InputPartition[] {new NoRows()};
      }
      return read.parts.toArray(new InputPartition[0]);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
      return new Readers(plan, read);
    }
  }

  /** A partition without rows. */
  record NoRows() implements InputPartition {}

  record Readers(Plan plan, ReadPlan read) implements PartitionReaderFactory {
    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
      return new Reader(plan, read, partition instanceof Part p ? p : null);
    }
  }

  /** A partition's groups, aggregated on the first next(), then handed out one row each. */
  static final class Reader implements PartitionReader<InternalRow> {
    private final Plan plan;
    private final ReadPlan read;
    private final Part part; // null: no rows
    private final Function[] functions;
    private final int width; // values of a group
    private long[] values = new long[64]; // group g's at g * width: longs, or doubles' bits
    private final GroupMap groups = new GroupMap();
    private int[] rowGroups = new int[0]; // of a batch's rows: their groups' index in values
    private int group = -1; // the row handed out
    private boolean aggregated;
    private boolean empty; // a global aggregate of no rows: one row, COUNT 0, the rest NULL

    Reader(Plan plan, ReadPlan read, Part part) {
      this.plan = plan;
      this.read = read;
      this.part = part;
      this.functions = plan.functions();
      this.width = Math.max(1, functions.length);
    }

    @Override
    public boolean next() {
      if (!aggregated) {
        aggregated = true;
        if (part != null) {
          aggregate();
        }
        empty = plan.keyName() == null && groups.size() == 0;
      }
      group++;
      return group < (empty ? 1 : groups.size());
    }

    private void aggregate() {
      long constant =
          switch (plan.keyName() == null || plan.keyOffset() >= 0 ? "" : plan.keyName()) {
            case "recording_id" -> part.recordingId();
            case "session_id" -> part.sessionId();
            case "stream_id" -> part.streamId();
            default -> 0;
          };
      try (PartReader frames = new PartReader(part, new StructType(), read)) {
        while (frames.next()) {
          int rows = frames.get().numRows();
          long[] addresses = frames.addresses();
          int[] at = group(addresses, rows, constant);
          for (int i = 0; i < functions.length; i++) {
            fold(functions[i], i, addresses, at, rows);
          }
        }
      }
    }

    /** The index in `values` of each row's group (a group met first started there). */
    private int[] group(long[] addresses, int rows, long constant) {
      if (rowGroups.length < rows) {
        rowGroups = new int[rows];
      }
      int keyOffset = plan.keyOffset();
      Kind keyKind = plan.keyKind();
      for (int row = 0; row < rows; row++) {
        long key = keyOffset >= 0 ? keyKind.integral(addresses[row] + keyOffset) : constant;
        int g = groups.find(key);
        if (g < 0) {
          g = groups.add(key);
          start(g, addresses[row]);
        }
        rowGroups[row] = g * width;
      }
      return rowGroups;
    }

    /**
     * A new group's values: COUNT and SUM 0 (Spark's sum starts from 0 too: -0.0 + 0.0 is 0.0),
     * MIN and MAX its first record's, which folding that record leaves as they are.
     */
    private void start(int g, long address) {
      if ((g + 1) * width > values.length) {
        values = Arrays.copyOf(values, Math.max(2 * values.length, (g + 1) * width));
      }
      for (int i = 0; i < functions.length; i++) {
        Function f = functions[i];
        long first = 0;
        if (f.op() == Op.MIN || f.op() == Op.MAX) {
          first = f.kind().integral()
              ? f.kind().integral(address + f.offset())
              : Double.doubleToRawLongBits(f.kind().floating(address + f.offset()));
        } else if (f.op() == Op.SUM && !f.kind().integral()) {
          first = Double.doubleToRawLongBits(0.0);
        }
        values[g * width + i] = first;
      }
    }

    /** Folds function `i` of every row into its group's value: a loop per kind of function. */
    private void fold(Function f, int i, long[] addresses, int[] at, int rows) {
      long[] v = values;
      Kind kind = f.kind();
      int offset = f.offset();
      if (f.op() == Op.COUNT) {
        for (int row = 0; row < rows; row++) {
          v[at[row] + i]++;
        }
      } else if (f.op() == Op.SUM && kind.integral()) {
        boolean ansi = plan.ansi();
        for (int row = 0; row < rows; row++) {
          int j = at[row] + i;
          long x = kind.integral(addresses[row] + offset);
          v[j] = ansi ? addExact(v[j], x) : v[j] + x;
        }
      } else if (f.op() == Op.SUM) {
        for (int row = 0; row < rows; row++) {
          int j = at[row] + i;
          double x = kind.floating(addresses[row] + offset);
          v[j] = Double.doubleToRawLongBits(Double.longBitsToDouble(v[j]) + x);
        }
      } else if (kind.integral()) {
        boolean max = f.op() == Op.MAX;
        for (int row = 0; row < rows; row++) {
          int j = at[row] + i;
          long x = kind.integral(addresses[row] + offset);
          if (max ? x > v[j] : x < v[j]) {
            v[j] = x;
          }
        }
      } else {
        boolean max = f.op() == Op.MAX;
        for (int row = 0; row < rows; row++) {
          int j = at[row] + i;
          double x = kind.floating(addresses[row] + offset);
          int order = SQLOrderingUtil.compareDoubles(x, Double.longBitsToDouble(v[j]));
          if (max ? order > 0 : order < 0) {
            v[j] = Double.doubleToRawLongBits(x);
          }
        }
      }
    }

    /** a + b, or Spark's ARITHMETIC_OVERFLOW error (MathUtils.addExact's, which is slow). */
    private static long addExact(long a, long b) {
      long sum = a + b;
      if (((a ^ sum) & (b ^ sum)) < 0) {
        return MathUtils.addExact(a, b, null); // with its hint, as Spark's Sum
      }
      return sum;
    }

    @Override
    public InternalRow get() {
      int keys = plan.keyName() == null ? 0 : 1;
      Object[] row = new Object[keys + functions.length];
      if (empty) {
        for (int i = 0; i < functions.length; i++) {
          row[i] = functions[i].op() == Op.COUNT ? (Object) 0L : null;
        }
        return new GenericInternalRow(row);
      }
      if (keys == 1) {
        row[0] = plan.keyKind().box(groups.key(group));
      }
      for (int i = 0; i < functions.length; i++) {
        Function f = functions[i];
        long v = values[group * width + i];
        row[keys + i] =
            f.op() == Op.COUNT || (f.op() == Op.SUM && f.kind().integral())
                ? (Object) v
                : f.op() == Op.SUM ? (Object) Double.longBitsToDouble(v) : f.kind().box(v);
      }
      return new GenericInternalRow(row);
    }

    @Override
    public void close() {}
  }

  /**
   * Groups by a long key, in the order first met: keys in [0, DIRECT) by a table, others by
   * open addressing.
   */
  static final class GroupMap {
    private static final int DIRECT = 1024;
    private final int[] direct = filled(DIRECT);
    private long[] slotKeys = new long[256];
    private int[] slotGroups = filled(256);
    private long[] keys = new long[64]; // of group g
    private int size;
    private int hashed; // groups in the slots

    int size() {
      return size;
    }

    long key(int group) {
      return keys[group];
    }

    /** The group of `key`, or -1. */
    int find(long key) {
      if (key >= 0 && key < DIRECT) {
        return direct[(int) key];
      }
      int mask = slotKeys.length - 1;
      for (int s = hash(key) & mask; ; s = (s + 1) & mask) {
        int g = slotGroups[s];
        if (g < 0 || slotKeys[s] == key) {
          return g;
        }
      }
    }

    /** A new group for `key` (not in the map). */
    int add(long key) {
      if (key >= 0 && key < DIRECT) {
        direct[(int) key] = size;
      } else {
        if (2 * (hashed + 1) > slotKeys.length) {
          grow();
        }
        place(key, size);
        hashed++;
      }
      if (size == keys.length) {
        keys = Arrays.copyOf(keys, 2 * size);
      }
      keys[size] = key;
      return size++;
    }

    private void place(long key, int group) {
      int mask = slotKeys.length - 1;
      int s = hash(key) & mask;
      while (slotGroups[s] >= 0) {
        s = (s + 1) & mask;
      }
      slotKeys[s] = key;
      slotGroups[s] = group;
    }

    private void grow() {
      slotKeys = new long[2 * slotKeys.length];
      slotGroups = filled(slotKeys.length);
      for (int g = 0; g < size; g++) {
        if (keys[g] < 0 || keys[g] >= DIRECT) {
          place(keys[g], g);
        }
      }
    }

    private static int hash(long key) {
      long h = key * 0x9E3779B97F4A7C15L;
      return (int) (h ^ (h >>> 32));
    }

    private static int[] filled(int n) {
      int[] a = new int[n];
      Arrays.fill(a, -1);
      return a;
    }
  }
}
