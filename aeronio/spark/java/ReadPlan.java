package io.aeronio.spark;

import java.util.List;
import java.util.Map;
import org.apache.spark.sql.types.StructType;

/**
 * A read's plan, made by ReadOptions on the driver: the layout, how records are laid out, and
 * the partitions to read (Part). Readers take it with their partition (serialized: the parts
 * travel on their own).
 */
final class ReadPlan implements java.io.Serializable {
  private static final long serialVersionUID = 3L;
  final String layout; // raw, fixed or json
  final int recordSize; // layout fixed: bytes of a record, else 0
  final String recordNames; // layout fixed: "(name, ...)", for errors
  final Map<String, Integer> fieldOffsets; // record columns: offset in the record
  final StructType recordSchema; // layout json: the record's columns
  final String timeZone; // layout json: the session's, for timestamps
  final boolean failOnDataLoss;
  final int batchRows;
  final transient List<Part> parts; // the driver's

  ReadPlan(
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
}
