package io.aeronio.spark;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.expressions.aggregate.Aggregation;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownAggregates;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * `spark.read.format("aeronio")`: batch reads of an archive directory's recordings in the JVM,
 * planned here from the options alone (ReadOptions, Archive), read by PartReader (layouts raw and
 * fixed, as columnar batches) and JsonRows (layout json, by Spark's own JSON parser). Columns
 * are pruned; filters on recording_id, session_id, stream_id, channel and position choose the
 * recordings and the positions read (Spark still applies every filter to the rows: Filters).
 *
 * <p>What is not read here goes to the Python source registered as `aeronio_python` (by
 * aeronio.spark.register): writes, and reads of remote archives (option archive_control) or
 * of the msgpack layout.
 *
 * <p>A MicroBatchStream reuses this read: its planInputPartitions makes the same Parts
 * (Archive.split of each recording between two offsets, trusted message boundaries as
 * scanFrom) and its createReaderFactory is Readers.
 */
public final class AeronioSource implements TableProvider, DataSourceRegister {
  /** The Python source's name (aeronio.spark.source.PYTHON_NAME). */
  static final String PYTHON = "aeronio_python";
  /** Rows of a columnar batch: the session's setting, as Parquet's columnarReaderBatchSize. */
  static final String BATCH_ROWS = "spark.aeronio.columnarReaderBatchSize";

  /** The session's BATCH_ROWS (4096 unless set), checked. */
  static int batchRows() {
    String value = SQLConf.get().getConfString(BATCH_ROWS, "4096");
    int rows;
    try {
      rows = Integer.parseInt(value.strip());
    } catch (NumberFormatException e) {
      rows = 0;
    }
    if (rows <= 0) {
      throw Archive.error(BATCH_ROWS + ": " + Archive.repr(value) + " is not a positive integer");
    }
    return rows;
  }

  @Override
  public String shortName() {
    return "aeronio";
  }

  /**
   * The schema without .schema(...): the raw columns (layout raw only), every option checked
   * first (either kind of read's), as Python's DataSource.schema.
   */
  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    List<String> known = new ArrayList<>(ReadOptions.BATCH);
    known.addAll(ReadOptions.STREAM_ONLY);
    ReadOptions.checkNames(options, known, "reading");
    String layout = options.getOrDefault("layout", "raw").strip().toLowerCase();
    if (inPython(options)) { // a remote archive's options: checked by the Python source
      if (!ReadOptions.LAYOUTS.contains(layout)) {
        throw Archive.error(
            "option layout: " + Archive.repr(layout) + " is not one of " + String.join(", ", ReadOptions.LAYOUTS));
      }
    } else {
      StreamOptions.check(options);
    }
    if (!layout.equals("raw")) {
      throw Archive.error(
          "layout " + layout + " needs a schema: .schema(\"ts long, price double\")");
    }
    List<StructField> fields = new ArrayList<>();
    ReadOptions.RAW.forEach(
        (name, type) -> fields.add(new StructField(name, type, true, org.apache.spark.sql.types.Metadata.empty())));
    return new StructType(fields.toArray(new StructField[0]));
  }

  @Override
  public boolean supportsExternalMetadata() {
    return true;
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> options) {
    return new Recordings(schema, options);
  }

  /** Whether a batch read with these options goes to the Python source. */
  static boolean inPython(Map<String, String> options) {
    String control = options.get("archive_control");
    String layout = options.getOrDefault("layout", "").strip().toLowerCase();
    return (control != null && !control.isEmpty()) || layout.equals("msgpack");
  }

  /** An archive's recordings as a table: read here, else through Python's. */
  static final class Recordings implements Table, SupportsRead, SupportsWrite {
    private final StructType schema;
    private final Map<String, String> options;
    private Table python;

    Recordings(StructType schema, Map<String, String> options) {
      this.schema = schema;
      this.options = options;
    }

    /** The Python source's table for these options. */
    Table python() {
      if (python == null) {
        PythonDataSourceV2 provider = new PythonDataSourceV2();
        provider.setShortName(PYTHON);
        try {
          provider.source(); // looks the Python source up, or fails here
          python = provider.getTable(schema, new Transform[0], options);
        } catch (Exception e) { // Spark's AnalysisException (DATA_SOURCE_NOT_EXIST) is checked
          throw new IllegalStateException(
              "aeronio: writes, remote archives and the msgpack layout go"
                  + " through the Python source: call aeronio.spark.register(spark) ("
                  + e.getMessage() + ")", e);
        }
      }
      return python;
    }

    @Override
    public String name() {
      return "aeronio";
    }

    @Override
    @SuppressWarnings("deprecation")
    public StructType schema() {
      return schema;
    }

    /** The Python table's (writes: truncate lets mode overwrite reach its refusal). */
    @Override
    public Set<TableCapability> capabilities() {
      return EnumSet.of(
          TableCapability.BATCH_READ, TableCapability.MICRO_BATCH_READ,
          TableCapability.BATCH_WRITE, TableCapability.STREAMING_WRITE,
          TableCapability.TRUNCATE);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap scanOptions) {
      return new Builder(this);
    }

    @Override
    public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
      return ((SupportsWrite) python()).newWriteBuilder(info);
    }
  }

  /**
   * Columns pruned, filters taken and aggregates pushed (Aggregates; not when the read goes to
   * Python).
   */
  static final class Builder
      implements ScanBuilder, SupportsPushDownRequiredColumns, SupportsPushDownFilters,
          SupportsPushDownAggregates {
    private final Recordings table;
    private final boolean here;
    private StructType schema;
    private Filter[] filters = new Filter[0];
    private Aggregates.Plan aggregates; // pushed, else null

    Builder(Recordings table) {
      this.table = table;
      this.here = !inPython(table.options);
      this.schema = table.schema;
    }

    @Override
    public void pruneColumns(StructType required) {
      if (here) {
        schema = required;
      }
    }

    @Override
    public Filter[] pushFilters(Filter[] given) {
      if (here) {
        filters = given;
      }
      return given; // Spark applies them all to the rows read
    }

    @Override
    public Filter[] pushedFilters() {
      return Filters.used(filters, metadataNames());
    }

    private Set<String> metadataNames() {
      String layout = table.options.getOrDefault("layout", "raw").strip().toLowerCase();
      if (layout.equals("raw")) {
        return Set.of(table.schema.fieldNames());
      }
      Set<String> out = new java.util.HashSet<>();
      for (String name : table.options.getOrDefault("metadata_columns", "").split(",")) {
        out.add(name.strip());
      }
      return out;
    }

    /**
     * Takes `aggregation` when Aggregates can compute it (layout fixed, option
     * push_down_aggregates not false); options or a schema in error are left to toBatch to
     * report, as without an aggregation.
     */
    @Override
    public boolean pushAggregation(Aggregation aggregation) {
      if (!here) {
        return false;
      }
      try {
        ReadOptions options = ReadOptions.batch(table.options);
        if (!options.layout.equals("fixed") || !options.pushDownAggregates) {
          return false;
        }
        ReadPlan check = options.plan(table.schema, null, batchRows(), List.of());
        aggregates =
            Aggregates.of(
                aggregation, table.schema, check.fieldOffsets, options.metadata(table.schema),
                SQLConf.get().ansiEnabled());
      } catch (RuntimeException e) {
        aggregates = null;
      }
      return aggregates != null;
    }

    @Override
    public Scan build() {
      return new RecordsScan(table, schema, filters, metadataNames(), aggregates);
    }
  }

  /**
   * The read: planned in toBatch (a batch read's options checked there, on the driver); with an
   * aggregation pushed, its rows are the partitions' groups.
   */
  static final class RecordsScan implements Scan {
    private final Recordings table;
    private final StructType schema;
    private final Filter[] filters;
    private final Set<String> metadata;
    private final Aggregates.Plan aggregates; // null: none pushed

    RecordsScan(
        Recordings table, StructType schema, Filter[] filters, Set<String> metadata,
        Aggregates.Plan aggregates) {
      this.table = table;
      this.schema = schema;
      this.filters = filters;
      this.metadata = metadata;
      this.aggregates = aggregates;
    }

    @Override
    public StructType readSchema() {
      return aggregates == null ? schema : aggregates.schema();
    }

    @Override
    public String description() {
      String read = "aeronio " + table.options.getOrDefault("layout", "raw") + " records";
      return aggregates == null ? read : read + ", aggregated: " + aggregates.describe();
    }

    @Override
    public Batch toBatch() {
      if (inPython(table.options)) {
        return ((SupportsRead) table.python()).newScanBuilder(new CaseInsensitiveStringMap(table.options)).build().toBatch();
      }
      ReadOptions options = ReadOptions.batch(table.options);
      Path archive = Path.of(options.archive).toAbsolutePath();
      int batchRows = batchRows();
      ReadPlan check = options.plan(table.schema, null, batchRows, List.of());
      long[] bounds = Filters.positions(filters, metadata);
      long low = Math.max(options.startPosition, bounds[0]);
      long high = Math.min(options.endPosition, bounds[1]);
      var positions = options.driverDir == null ? null : Archive.recordingPositions(Path.of(options.driverDir));
      List<Part> parts = new ArrayList<>();
      List<Archive.Recording> sound = Archive.recordings(archive);
      if (options.recordingIds != null) { // a batch cannot wait for one: it would read none of it
        Set<Long> known = new HashSet<>();
        sound.forEach(r -> known.add(r.recordingId()));
        for (long rid : new TreeSet<>(options.recordingIds)) {
          if (!known.contains(rid)) {
            throw Archive.error(
                "option recording_ids: recording " + rid + " is not a sound recording of the"
                    + " archive's catalog (not there, invalidated, or its entry corrupt: logged)");
          }
        }
      }
      for (Archive.Recording r : sound) {
        boolean selected =
            (options.recordingIds == null || options.recordingIds.contains(r.recordingId()))
                && (options.channel == null || r.channel().contains(options.channel))
                && (options.streamId == null || r.streamId() == options.streamId);
        if (selected && Filters.mayHold(filters, metadata, r)) {
          long end = Archive.readableEnd(archive, r, positions);
          parts.addAll(
              Archive.split(
                  archive, r, Math.max(low, r.startPosition()), Math.min(high, end), end,
                  options.maxPartitionBytes));
        }
      }
      ReadPlan plan =
          new ReadPlan(
              check.layout, check.recordSize, check.fieldOffsets, check.recordSchema,
              SQLConf.get().sessionLocalTimeZone(), check.failOnDataLoss, batchRows, parts);
      return aggregates == null
          ? new Planned(schema, plan)
          : new Aggregates.Read(aggregates, plan);
    }

    @Override
    public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
      if (!inPython(table.options)) {
        return new MicroStream(table.options, table.schema, schema);
      }
      return ((SupportsRead) table.python())
          .newScanBuilder(new CaseInsensitiveStringMap(table.options))
          .build()
          .toMicroBatchStream(checkpointLocation);
    }
  }

  /** A planned batch read: its partitions and their readers. */
  record Planned(StructType schema, ReadPlan plan) implements Batch {
    @Override
    public InputPartition[] planInputPartitions() {
      return plan.parts.toArray(new InputPartition[0]);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
      return new Readers(schema, plan);
    }
  }

  /** Columnar readers (layouts raw, fixed), or rows of JSON (layout json). */
  record Readers(StructType schema, ReadPlan plan) implements PartitionReaderFactory {
    @Override
    public boolean supportColumnarReads(InputPartition partition) {
      return !plan.layout.equals("json");
    }

    @Override
    public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
      return new PartReader((Part) partition, schema, plan);
    }

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
      return new JsonRows((Part) partition, schema, plan);
    }
  }
}
