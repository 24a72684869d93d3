package io.aeronio.spark;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.json.CreateJacksonParser;
import org.apache.spark.sql.catalyst.json.JSONOptions;
import org.apache.spark.sql.catalyst.json.JacksonParser;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.types.BinaryType$;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Layout json: each message's payload parsed by Spark's own JSON parser (JacksonParser, as
 * spark.read.json and from_json parse) into the record's columns; metadata columns from the
 * message. PartReader walks the frames and joins the payloads (its column data).
 */
final class JsonRows implements PartitionReader<InternalRow> {
  private final Part part;
  private final PartReader frames;
  private final JacksonParser parser;
  private final int[] sources; // per output column: its column in the batch, or -(record column + 1)
  private final DataType[] types;
  private final int recordColumns;
  private ColumnarBatch batch;
  private int row, rows;
  private final GenericInternalRow out;

  JsonRows(Part part, StructType schema, ReadPlan plan) {
    this.part = part;
    List<StructField> read = new ArrayList<>();
    read.add(new StructField("data", BinaryType$.MODULE$, false, Metadata.empty()));
    StructField[] fields = schema.fields();
    sources = new int[fields.length];
    types = new DataType[fields.length];
    for (int i = 0; i < fields.length; i++) {
      types[i] = fields[i].dataType();
      if (plan.recordSchema.getFieldIndex(fields[i].name()).isDefined()) {
        sources[i] = -(plan.recordSchema.fieldIndex(fields[i].name()) + 1);
      } else {
        sources[i] = read.size();
        read.add(fields[i]);
      }
    }
    recordColumns = plan.recordSchema.size();
    frames = new PartReader(part, new StructType(read.toArray(new StructField[0])), plan);
    JSONOptions options =
        new JSONOptions(
            scala.collection.immutable.Map$.MODULE$.<String, String>empty(),
            plan.timeZone,
            "_corrupt_record");
    parser =
        new JacksonParser(
            plan.recordSchema, options, false, JacksonParser.$lessinit$greater$default$4());
    out = new GenericInternalRow(fields.length);
  }

  @Override
  public boolean next() {
    while (batch == null || ++row >= rows) {
      if (!frames.next()) {
        return false;
      }
      batch = frames.get();
      rows = batch.numRows();
      row = -1;
    }
    ColumnVector data = batch.column(0);
    byte[] payload = data.getBinary(row);
    InternalRow record = parse(payload);
    for (int i = 0; i < sources.length; i++) {
      int source = sources[i];
      if (source < 0) {
        out.update(i, record.get(-source - 1, types[i]));
      } else {
        ColumnVector column = batch.column(source);
        out.update(i, switch (types[i].typeName()) {
          case "long" -> column.getLong(row);
          case "integer" -> column.getInt(row);
          default -> column.getUTF8String(row); // channel
        });
      }
    }
    return true;
  }

  private InternalRow parse(byte[] payload) {
    try {
      scala.collection.Iterator<InternalRow> parsed =
          parser
              .parse(
                  payload,
                  (factory, bytes) -> CreateJacksonParser.bytes(factory, bytes),
                  UTF8String::fromBytes)
              .iterator();
      if (parsed.hasNext()) {
        InternalRow record = parsed.next();
        if (record.numFields() == recordColumns) {
          return record;
        }
      }
      throw new IllegalArgumentException("not a JSON object");
    } catch (Exception e) {
      Throwable cause = e.getCause() != null ? e.getCause() : e;
      throw Archive.error(
          "layout json: the message at position " + frames.positionOf(row) + " of recording "
              + part.recordingId() + " does not decode: " + cause.getMessage());
    }
  }

  @Override
  public InternalRow get() {
    return out;
  }

  @Override
  public void close() {
    frames.close();
  }
}
