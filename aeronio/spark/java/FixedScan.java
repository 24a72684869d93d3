package io.aeronio.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * The JVM side of aeronio.spark.read_fixed: fixed-layout records of an archive's recordings as
 * columnar batches, read straight from the segment files.
 *
 * <p>Python plans the read (catalog, options, partitions that never split a message, the
 * record's field offsets: see aeronio/spark/jvm.py) and hands the plan over as the JSON option
 * "plan"; this side only walks the frames of each partition and decodes the records. The schema
 * is the user's (supportsExternalMetadata); column pruning is pushed down.
 */
public final class FixedScan implements TableProvider {
  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    throw new IllegalArgumentException(
        "aeronio's fixed-layout scan needs a schema: use aeronio.spark.read_fixed(spark, schema,"
            + " ...)");
  }

  @Override
  public boolean supportsExternalMetadata() {
    return true;
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> options) {
    String text = options.get("plan");
    if (text == null) {
      throw new IllegalArgumentException(
          "aeronio's fixed-layout scan is planned by aeronio.spark.read_fixed (option plan missing)");
    }
    return new RecordsTable(schema, Plan.parse(text, schema));
  }

  /**
   * A read's plan (Python's, for read_fixed; AeronioSource's own): the layout, how records are
   * laid out, and the partitions to read.
   */
  static final class Plan implements java.io.Serializable {
    private static final long serialVersionUID = 2L;
    final String layout; // raw, fixed or json
    final int recordSize; // layout fixed: bytes of a record, else 0
    final String recordNames; // layout fixed: "(name, ...)", for errors
    final Map<String, Integer> fieldOffsets; // record columns: offset in the record
    final StructType recordSchema; // layout json: the record's columns
    final String timeZone; // layout json: the session's, for timestamps
    final boolean failOnDataLoss;
    final int batchRows;
    final transient List<Part> parts; // the driver's: partitions travel on their own

    Plan(
        String layout,
        int recordSize,
        Map<String, Integer> fieldOffsets,
        StructType recordSchema,
        String timeZone,
        boolean failOnDataLoss,
        int batchRows,
        List<Part> parts) {
      this.layout = layout;
      this.recordSize = recordSize;
      this.recordNames = "(" + String.join(", ", fieldOffsets.keySet()) + ")";
      this.fieldOffsets = fieldOffsets;
      this.recordSchema = recordSchema;
      this.timeZone = timeZone;
      this.failOnDataLoss = failOnDataLoss;
      this.batchRows = batchRows;
      this.parts = parts;
    }

    static Plan parse(String text, StructType schema) {
      JsonNode root;
      try {
        root = new ObjectMapper().readTree(text);
      } catch (IOException e) {
        throw new UncheckedIOException("aeronio's fixed-layout scan: the plan is not JSON", e);
      }
      Map<String, Integer> offsets = new LinkedHashMap<>();
      for (JsonNode field : root.get("fields")) { // [name, offset in the record]
        offsets.put(field.get(0).asText(), field.get(1).asInt());
      }
      for (String name : schema.fieldNames()) {
        if (!offsets.containsKey(name) && !Columns.METADATA.contains(name)) {
          throw new IllegalArgumentException(
              "aeronio's fixed-layout scan: column " + name + " is not in the plan");
        }
      }
      List<Part> parts = new ArrayList<>();
      for (JsonNode p : root.get("parts")) {
        parts.add(
            new Part(
                p.get("file").asText(),
                p.get("file_position").asLong(),
                p.get("recording_id").asLong(),
                p.get("session_id").asInt(),
                p.get("stream_id").asInt(),
                p.get("channel").asText(),
                p.get("term_length").asInt(),
                p.get("initial_term_id").asInt(),
                p.get("scan_from").asLong(),
                p.get("emit_from").asLong(),
                p.get("emit_to").asLong(),
                p.get("read_limit").asLong()));
      }
      return new Plan(
          "fixed",
          root.get("record_size").asInt(),
          offsets,
          null,
          null,
          root.get("fail_on_data_loss").asBoolean(),
          root.get("batch_rows").asInt(),
          parts);
    }
  }

  /** One partition: the messages of a recording that start in [emitFrom, emitTo). */
  record Part(
      String file, // the segment file
      long filePosition, // the stream position of its first byte
      long recordingId,
      int sessionId,
      int streamId,
      String channel,
      int termLength,
      int initialTermId,
      long scanFrom, // a frame boundary at or before emitFrom
      long emitFrom,
      long emitTo,
      long readLimit) // whole frames are recorded up to here
      implements InputPartition {}

  /** Its schema() (deprecated for columns(), which Spark derives from it) is the record's. */
  record RecordsTable(StructType schema, Plan plan) implements Table, SupportsRead {
    @Override
    public String name() {
      return "aeronio fixed-layout records";
    }

    @Override
    public Set<TableCapability> capabilities() {
      return EnumSet.of(TableCapability.BATCH_READ);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
      return new RecordsScan(schema, plan);
    }
  }

  /** Its own builder (the columns pruned), scan and batch. */
  static final class RecordsScan implements SupportsPushDownRequiredColumns, Scan, Batch {
    private StructType schema;
    private final Plan plan;

    RecordsScan(StructType schema, Plan plan) {
      this.schema = schema;
      this.plan = plan;
    }

    @Override
    public void pruneColumns(StructType required) {
      schema = required;
    }

    @Override
    public Scan build() {
      return this;
    }

    @Override
    public StructType readSchema() {
      return schema;
    }

    @Override
    public String description() {
      return "aeronio fixed-layout records, " + plan.parts.size() + " partition(s)";
    }

    @Override
    public Batch toBatch() {
      return this;
    }

    @Override
    public InputPartition[] planInputPartitions() {
      return plan.parts.toArray(new InputPartition[0]);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
      return new AeronioSource.Readers(schema, plan);
    }
  }
}
