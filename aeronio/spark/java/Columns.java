package io.aeronio.spark;

import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.Set;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A batch's columns. Layout fixed: each row's record is read where it lies, by its address: a
 * message of one frame in the mapped segment itself (no copy), a message of several frames
 * joined in a scratch buffer; each record column reads its field at the row's address. The
 * addresses stay valid while the batch is read: the columns hold the mapping (and the scratch),
 * and the partition's reader moves on only when Spark asks for its next batch. Column `data`
 * (layout raw; json's payloads): each message's payload, fragments joined, appended to one
 * array. Metadata columns are the partition's (recording_id, session_id, stream_id, channel) or
 * each message's (position, length, reserved_value).
 */
final class Columns {
  static final Set<String> METADATA =
      Set.of(
          "recording_id",
          "session_id",
          "stream_id",
          "channel",
          "position",
          "length",
          "reserved_value");

  private final int recordSize;
  private final ByteBuffer mapping; // held: the rows' addresses point into it
  private final long[] addresses; // of each row's record
  private ByteBuffer scratch; // records joined from fragments (row * record size), when met
  private long scratchAddress;
  private final long[] positions;
  private final int[] lengths;
  private final long[] reservedValues;
  private final ColumnVector[] vectors;
  private final Payloads payloads; // column data, else null

  Columns(StructType schema, ReadPlan plan, Part part, ByteBuffer mapping) {
    recordSize = plan.recordSize;
    this.mapping = mapping;
    addresses = new long[plan.batchRows];
    positions = new long[plan.batchRows];
    lengths = new int[plan.batchRows];
    reservedValues = new long[plan.batchRows];
    StructField[] fields = schema.fields();
    vectors = new ColumnVector[fields.length];
    Payloads data = null;
    for (int i = 0; i < fields.length; i++) {
      String name = fields[i].name();
      DataType type = fields[i].dataType();
      Integer offset = plan.fieldOffsets.get(name);
      if (offset == null && name.equals("data")) {
        data = new Payloads(type, plan.batchRows);
        vectors[i] = data;
      } else if (offset != null) {
        vectors[i] = new RecordField(type, this, offset);
      } else {
        vectors[i] =
            switch (name) {
              case "recording_id" -> new Longs(type, constant(plan.batchRows, part.recordingId()));
              case "session_id" -> new Ints(type, constant(plan.batchRows, part.sessionId()));
              case "stream_id" -> new Ints(type, constant(plan.batchRows, part.streamId()));
              case "channel" -> new Text(type, UTF8String.fromString(part.channel()));
              case "position" -> new Longs(type, positions);
              case "length" -> new Ints(type, lengths);
              case "reserved_value" -> new Longs(type, reservedValues);
              default -> throw new AssertionError(name); // the plan checked the columns
            };
      }
    }
    payloads = data;
  }

  ColumnVector[] vectors() {
    return vectors;
  }

  /** Takes row `row`'s message of one frame: `length` payload bytes at `address`. */
  void whole(int row, long address, int length) {
    addresses[row] = address;
    if (payloads != null) {
      payloads.append(row, 0, address, length);
    }
  }

  /**
   * Takes a fragment of row `row`'s message: `length` payload bytes at `address`, `offset`
   * bytes into the message (0: a new message, in place of one not finished there before).
   */
  void fragment(int row, int offset, long address, int length) {
    if (offset + length <= recordSize) {
      if (scratch == null) {
        scratch = ByteBuffer.allocateDirect(addresses.length * recordSize);
        scratchAddress = Mapped.address(scratch);
      }
      long record = scratchAddress + (long) row * recordSize;
      Mapped.copy(address, record + offset, length);
      addresses[row] = record;
    }
    if (payloads != null) {
      payloads.append(row, offset, address, length);
    }
  }

  void message(int row, long position, int length, long reservedValue) {
    positions[row] = position;
    lengths[row] = length;
    reservedValues[row] = reservedValue;
  }

  /** The address of each row's record (layout fixed). */
  long[] addresses() {
    return addresses;
  }

  long position(int row) {
    return positions[row];
  }

  private static long[] constant(int rows, long value) {
    long[] values = new long[rows];
    Arrays.fill(values, value);
    return values;
  }

  private static int[] constant(int rows, int value) {
    int[] values = new int[rows];
    Arrays.fill(values, value);
    return values;
  }

  /** A column that is never null and holds one kind of value; other getters refuse. */
  private abstract static class Column extends ColumnVector {
    Column(DataType type) {
      super(type);
    }

    @Override
    public void close() {}

    @Override
    public boolean hasNull() {
      return false;
    }

    @Override
    public int numNulls() {
      return 0;
    }

    @Override
    public boolean isNullAt(int rowId) {
      return false;
    }

    private UnsupportedOperationException wrong() {
      return new UnsupportedOperationException("aeronio: a " + type.simpleString() + " column");
    }

    @Override
    public boolean getBoolean(int rowId) {
      throw wrong();
    }

    @Override
    public byte getByte(int rowId) {
      throw wrong();
    }

    @Override
    public short getShort(int rowId) {
      throw wrong();
    }

    @Override
    public int getInt(int rowId) {
      throw wrong();
    }

    @Override
    public long getLong(int rowId) {
      throw wrong();
    }

    @Override
    public float getFloat(int rowId) {
      throw wrong();
    }

    @Override
    public double getDouble(int rowId) {
      throw wrong();
    }

    @Override
    public ColumnarArray getArray(int rowId) {
      throw wrong();
    }

    @Override
    public ColumnarMap getMap(int rowId) {
      throw wrong();
    }

    @Override
    public Decimal getDecimal(int rowId, int precision, int scale) {
      throw wrong();
    }

    @Override
    public UTF8String getUTF8String(int rowId) {
      throw wrong();
    }

    @Override
    public byte[] getBinary(int rowId) {
      throw wrong();
    }

    @Override
    public ColumnVector getChild(int ordinal) {
      throw wrong();
    }
  }

  /** A field of the little-endian records, read at each row's address. */
  private static final class RecordField extends Column {
    private final Columns columns; // its addresses, and what they point into
    private final long[] addresses;
    private final int offset; // of the field in the record

    RecordField(DataType type, Columns columns, int offset) {
      super(type); // one of the types Python's Decoder allows in a fixed record
      this.columns = columns;
      this.addresses = columns.addresses;
      this.offset = offset;
    }

    private long at(int rowId) {
      return addresses[rowId] + offset;
    }

    @Override
    public boolean getBoolean(int rowId) {
      return Mapped.getByte(null, at(rowId)) != 0;
    }

    @Override
    public byte getByte(int rowId) {
      return Mapped.getByte(null, at(rowId));
    }

    @Override
    public short getShort(int rowId) {
      return Mapped.getShort(null, at(rowId));
    }

    @Override
    public int getInt(int rowId) {
      return Mapped.getInt(null, at(rowId));
    }

    @Override
    public long getLong(int rowId) {
      return Mapped.getLong(null, at(rowId));
    }

    @Override
    public float getFloat(int rowId) {
      return Float.intBitsToFloat(Mapped.getInt(null, at(rowId)));
    }

    @Override
    public double getDouble(int rowId) {
      return Double.longBitsToDouble(Mapped.getLong(null, at(rowId)));
    }
  }

  /** Payloads appended to one growing array: row i's are data[starts[i], ends[i]). */
  private static final class Payloads extends Column {
    private byte[] data = new byte[1 << 16];
    private final int[] starts, ends;

    Payloads(DataType type, int rows) {
      super(type);
      starts = new int[rows];
      ends = new int[rows];
    }

    void append(int row, int offset, long address, int length) {
      if (offset == 0) {
        starts[row] = ends[row] = row > 0 ? ends[row - 1] : 0;
      }
      int end = ends[row];
      if (end + length > data.length) {
        data = Arrays.copyOf(data, Math.max(2 * data.length, end + length));
      }
      Mapped.copy(address, data, end, length);
      ends[row] = end + length;
    }

    @Override
    public byte[] getBinary(int rowId) {
      return Arrays.copyOfRange(data, starts[rowId], ends[rowId]);
    }
  }

  private static final class Longs extends Column {
    private final long[] values;

    Longs(DataType type, long[] values) {
      super(type);
      this.values = values;
    }

    @Override
    public long getLong(int rowId) {
      return values[rowId];
    }
  }

  private static final class Ints extends Column {
    private final int[] values;

    Ints(DataType type, int[] values) {
      super(type);
      this.values = values;
    }

    @Override
    public int getInt(int rowId) {
      return values[rowId];
    }
  }

  private static final class Text extends Column {
    private final UTF8String value;

    Text(DataType type, UTF8String value) {
      super(type);
      this.value = value;
    }

    @Override
    public UTF8String getUTF8String(int rowId) {
      return value;
    }
  }
}
