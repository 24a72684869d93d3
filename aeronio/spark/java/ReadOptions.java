package io.aeronio.spark;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.spark.sql.types.BinaryType$;
import org.apache.spark.sql.types.BooleanType$;
import org.apache.spark.sql.types.ByteType$;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DoubleType$;
import org.apache.spark.sql.types.FloatType$;
import org.apache.spark.sql.types.IntegerType$;
import org.apache.spark.sql.types.LongType$;
import org.apache.spark.sql.types.ShortType$;
import org.apache.spark.sql.types.StringType$;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * A batch read's options and schema, checked as aeronio/spark/options.py and decode.py check
 * them, with the same messages: a typo fails the query on the driver, naming the option.
 */
final class ReadOptions {
  static final List<String> BATCH =
      List.of(
          "archive", "path", "recording_ids", "channel", "stream_id", "layout",
          "metadata_columns", "driver_dir", "fail_on_data_loss", "max_partition_bytes",
          "start_position", "end_position", "archive_control", "archive_control_stream_id",
          "archive_timeout", "push_down_aggregates");
  static final List<String> STREAM_ONLY = List.of("starting_positions", "max_bytes_per_trigger");
  static final List<String> LAYOUTS = List.of("raw", "fixed", "msgpack", "json");
  /** The metadata columns and their types (decode.py's RAW: these and data). */
  static final Map<String, DataType> RAW = new LinkedHashMap<>();

  static {
    RAW.put("recording_id", LongType$.MODULE$);
    RAW.put("session_id", IntegerType$.MODULE$);
    RAW.put("stream_id", IntegerType$.MODULE$);
    RAW.put("channel", StringType$.MODULE$);
    RAW.put("position", LongType$.MODULE$);
    RAW.put("length", IntegerType$.MODULE$);
    RAW.put("reserved_value", LongType$.MODULE$);
    RAW.put("data", BinaryType$.MODULE$);
  }

  private static final Map<DataType, Integer> FIXED_SIZES =
      Map.of(
          LongType$.MODULE$, 8, IntegerType$.MODULE$, 4, ShortType$.MODULE$, 2,
          ByteType$.MODULE$, 1, DoubleType$.MODULE$, 8, FloatType$.MODULE$, 4,
          BooleanType$.MODULE$, 1);

  final String archive;
  final Set<Long> recordingIds; // null: all
  final String channel;
  final Integer streamId;
  final String layout;
  final List<String> metadataColumns;
  final String driverDir;
  final boolean failOnDataLoss;
  final boolean pushDownAggregates;
  final Long maxPartitionBytes;
  final long startPosition;
  final long endPosition;

  private ReadOptions(Map<String, String> o) {
    String control = o.get("archive_control");
    if (control == null || control.isEmpty()) { // else the Python source reads (AeronioSource)
      for (String name : List.of("archive_control_stream_id", "archive_timeout")) {
        if (o.get(name) != null) {
          throw Archive.error("option " + name + " is for a remote archive (archive_control)");
        }
      }
    }
    String a = o.get("archive"), p = o.get("path");
    archive = a != null && !a.isEmpty() ? a : p;
    if (archive == null || archive.isEmpty()) {
      throw Archive.error(
          "option archive is required: .option(\"archive\", DIR) or .load(DIR) (or"
              + " archive_control, a remote archive's control channel)");
    }
    if (a != null && !a.isEmpty() && p != null && !p.isEmpty() && !a.equals(p)) {
      throw Archive.error("two archives given: option archive " + Archive.repr(a) + " and path " + Archive.repr(p));
    }
    String ids = o.get("recording_ids");
    if (ids != null) {
      recordingIds = new HashSet<>();
      try {
        for (String id : ids.split(",")) {
          if (!id.strip().isEmpty()) {
            recordingIds.add(Long.parseLong(id.strip()));
          }
        }
      } catch (NumberFormatException e) {
        throw Archive.error(
            "option recording_ids: " + Archive.repr(ids) + " is not a comma-separated list of ids");
      }
      if (recordingIds.isEmpty()) {
        throw Archive.error("option recording_ids is empty");
      }
    } else {
      recordingIds = null;
    }
    String c = o.get("channel");
    channel = c == null || c.isEmpty() ? null : c;
    Long stream = integer(o, "stream_id", null);
    if (stream != null && stream != (int) (long) stream) {
      throw Archive.error("option stream_id: " + stream + " does not fit 32 bits");
    }
    streamId = stream == null ? null : (int) (long) stream;
    layout = o.getOrDefault("layout", "raw").strip().toLowerCase(Locale.ROOT);
    if (!LAYOUTS.contains(layout)) {
      throw Archive.error(
          "option layout: " + Archive.repr(layout) + " is not one of " + String.join(", ", LAYOUTS));
    }
    metadataColumns = new ArrayList<>();
    for (String name : o.getOrDefault("metadata_columns", "").split(",")) {
      if (!name.strip().isEmpty()) {
        metadataColumns.add(name.strip());
      }
    }
    if (!metadataColumns.isEmpty() && layout.equals("raw")) {
      throw Archive.error("option metadata_columns is for the fixed, msgpack and json layouts");
    }
    String d = o.get("driver_dir");
    driverDir = d == null || d.isEmpty() ? null : d;
    failOnDataLoss = bool(o, "fail_on_data_loss", true);
    pushDownAggregates = bool(o, "push_down_aggregates", true);
    maxPartitionBytes = size(o, "max_partition_bytes");
    Long start = integer(o, "start_position", 0L), end = integer(o, "end_position", 0L);
    if (start != null && end != null && end < start) {
      throw Archive.error("option end_position " + end + " is before start_position " + start);
    }
    startPosition = start == null ? 0 : start;
    endPosition = end == null ? Long.MAX_VALUE : end;
  }

  /** The options of a batch read from an archive directory, checked. */
  static ReadOptions batch(Map<String, String> options) {
    Set<String> misplaced = new TreeSet<>();
    for (String k : options.keySet()) {
      if (STREAM_ONLY.contains(k)) {
        misplaced.add(k);
      }
    }
    if (!misplaced.isEmpty()) {
      throw Archive.error(
          "option(s) " + String.join(", ", misplaced)
              + " are for a streaming read, not a batch read");
    }
    checkNames(options, BATCH, "a batch read");
    return new ReadOptions(options);
  }

  /** The options, their names unchecked (`options` has none of a streaming read's own). */
  static ReadOptions of(Map<String, String> options) {
    return new ReadOptions(options);
  }

  /** Fails naming the options that are not `known`. */
  static void checkNames(Map<String, String> options, List<String> known, String what) {
    Set<String> unknown = new TreeSet<>();
    for (String k : options.keySet()) {
      if (!known.contains(k.toLowerCase(Locale.ROOT))) {
        unknown.add(k.toLowerCase(Locale.ROOT));
      }
    }
    if (!unknown.isEmpty()) {
      throw Archive.error(
          "unknown option(s) for " + what + ": " + String.join(", ", unknown)
              + " (the options are: " + String.join(", ", new TreeSet<>(known)) + ")");
    }
  }

  private static Long integer(Map<String, String> o, String name, Long low) {
    String value = o.get(name);
    if (value == null) {
      return null;
    }
    long number;
    try {
      number = Long.parseLong(value.strip());
    } catch (NumberFormatException e) {
      throw Archive.error("option " + name + ": " + Archive.repr(value) + " is not an integer");
    }
    if (low != null && number < low) {
      throw Archive.error("option " + name + ": " + number + " must be at least " + low);
    }
    return number;
  }

  private static final Pattern SIZE =
      Pattern.compile("^\\s*(\\d+)\\s*([kmg]?)i?b?\\s*$", Pattern.CASE_INSENSITIVE);

  static Long size(Map<String, String> o, String name) {
    String value = o.get(name);
    if (value == null) {
      return null;
    }
    Matcher m = SIZE.matcher(value);
    if (!m.matches()) {
      throw Archive.error(
          "option " + name + ": " + Archive.repr(value) + " is not a size (bytes, or with k, m or g)");
    }
    int shift = switch (m.group(2).toLowerCase(Locale.ROOT)) {
      case "k" -> 10;
      case "m" -> 20;
      case "g" -> 30;
      default -> 0;
    };
    java.math.BigInteger number = new java.math.BigInteger(m.group(1)).shiftLeft(shift);
    if (number.signum() <= 0) {
      throw Archive.error("option " + name + ": " + Archive.repr(value) + " must be positive");
    }
    if (number.bitLength() > 63) {
      throw Archive.error("option " + name + ": " + Archive.repr(value) + " does not fit 64 bits");
    }
    return number.longValue();
  }

  private static boolean bool(Map<String, String> o, String name, boolean otherwise) {
    String value = o.get(name);
    if (value == null) {
      return otherwise;
    }
    String text = value.strip().toLowerCase(Locale.ROOT);
    if (Set.of("true", "1", "yes").contains(text)) {
      return true;
    }
    if (Set.of("false", "0", "no").contains(text)) {
      return false;
    }
    throw Archive.error("option " + name + ": " + Archive.repr(value) + " is not true or false");
  }

  /** The columns filled from the message rather than the record (all of them: layout raw). */
  Set<String> metadata(StructType schema) {
    return layout.equals("raw")
        ? new HashSet<>(Arrays.asList(schema.fieldNames()))
        : new HashSet<>(metadataColumns);
  }

  /**
   * The plan of a read of `schema` (its layout's checks, decode.py's Decoder's) over `parts`.
   */
  ReadPlan plan(StructType schema, String timeZone, int batchRows, List<Part> parts) {
    List<String> names = Arrays.asList(schema.fieldNames());
    if (new HashSet<>(names).size() != names.size()) {
      throw Archive.error("the schema names a column twice: " + names);
    }
    if (layout.equals("raw")) {
      for (StructField f : schema.fields()) {
        if (!RAW.containsKey(f.name())) {
          throw Archive.error(
              "column " + Archive.repr(f.name()) + " is not one of the raw layout's ("
                  + String.join(", ", RAW.keySet())
                  + "); decode messages with option layout fixed, msgpack or json");
        }
      }
    } else {
      for (String name : metadataColumns) {
        if (!RAW.containsKey(name) || name.equals("data")) {
          List<String> known = new ArrayList<>(RAW.keySet());
          known.remove("data");
          throw Archive.error(
              "option metadata_columns: " + Archive.repr(name) + " is not one of " + String.join(", ", known));
        }
        if (!names.contains(name)) {
          throw Archive.error("option metadata_columns: " + Archive.repr(name) + " is not a column of the schema");
        }
      }
    }
    Set<String> metadata = metadata(schema);
    List<StructField> record = new ArrayList<>();
    for (StructField f : schema.fields()) {
      if (metadata.contains(f.name())) {
        if (!f.dataType().equals(RAW.get(f.name()))) {
          throw Archive.error(
              "column " + Archive.repr(f.name()) + " must be " + RAW.get(f.name()).simpleString() + ", not "
                  + f.dataType().simpleString());
        }
      } else {
        record.add(f);
      }
    }
    if (!layout.equals("raw") && record.isEmpty()) {
      throw Archive.error("layout " + layout + " needs record columns in the schema");
    }
    Map<String, Integer> offsets = new LinkedHashMap<>();
    int size = 0;
    if (layout.equals("fixed")) {
      for (StructField f : record) {
        Integer width = FIXED_SIZES.get(f.dataType());
        if (width == null) {
          throw Archive.error(
              "layout fixed: column " + Archive.repr(f.name()) + " is " + f.dataType().simpleString()
                  + "; a fixed record holds long, int, short, byte, double, float or boolean");
        }
        offsets.put(f.name(), size);
        size += width;
      }
    }
    if (layout.equals("json")) {
      for (StructField f : record) {
        if (!decodable(f.dataType())) {
          throw Archive.error(
              "layout json: column " + Archive.repr(f.name()) + ": type "
                  + f.dataType().simpleString() + " is not supported");
        }
      }
    }
    StructType recordSchema = new StructType(record.toArray(new StructField[0]));
    return new ReadPlan(
        layout, size, offsets, recordSchema, timeZone, failOnDataLoss, batchRows, parts);
  }

  /** Whether a json record column's type is one the sources decode (decode.py's _python_type). */
  private static boolean decodable(DataType t) {
    return t instanceof org.apache.spark.sql.types.NumericType // integral, floating, decimal
        || t instanceof org.apache.spark.sql.types.StringType
        || t instanceof org.apache.spark.sql.types.BinaryType
        || t instanceof org.apache.spark.sql.types.BooleanType
        || t instanceof org.apache.spark.sql.types.TimestampType
        || t instanceof org.apache.spark.sql.types.DateType
        || t instanceof org.apache.spark.sql.types.ArrayType
        || t instanceof org.apache.spark.sql.types.MapType
        || t instanceof StructType;
  }
}
