package io.aeronio.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.util.Collections;
import java.util.Iterator;
import java.util.Map;
import java.util.SortedMap;
import java.util.TreeMap;
import org.apache.spark.sql.connector.read.streaming.Offset;

/**
 * A streaming read's offset: recording id to position, every message that starts before the
 * position read. Its JSON is the Python source's (json.dumps of reader.as_offset: ids as strings
 * in id order, `{"3": 4096, "7": 0}`), so that a checkpoint written by either resumes with the
 * other.
 */
final class StreamOffset extends Offset {
  private static final ObjectMapper JSON = new ObjectMapper();
  final SortedMap<Long, Long> positions;

  StreamOffset(Map<Long, Long> positions) {
    this.positions = Collections.unmodifiableSortedMap(new TreeMap<>(positions));
  }

  @Override
  public String json() {
    StringBuilder out = new StringBuilder("{");
    for (Map.Entry<Long, Long> e : positions.entrySet()) {
      if (out.length() > 1) {
        out.append(", ");
      }
      out.append('"').append(e.getKey()).append("\": ").append(e.getValue());
    }
    return out.append('}').toString();
  }

  /** An offset of a checkpoint (either source's JSON). */
  static StreamOffset parse(String json) {
    JsonNode root;
    try {
      root = JSON.readTree(json);
    } catch (IOException e) {
      throw Archive.error("a streaming offset is not JSON: " + json);
    }
    if (root == null || !root.isObject()) {
      throw Archive.error("a streaming offset is not a JSON object: " + json);
    }
    Map<Long, Long> out = new TreeMap<>();
    for (Iterator<Map.Entry<String, JsonNode>> it = root.fields(); it.hasNext(); ) {
      Map.Entry<String, JsonNode> e = it.next();
      out.put(Long.parseLong(e.getKey().strip()), e.getValue().asLong());
    }
    return new StreamOffset(out);
  }

  /** `offset` as a StreamOffset (Spark may hand one back as its JSON). */
  static StreamOffset of(Offset offset) {
    if (offset == null) {
      return new StreamOffset(Map.of());
    }
    return offset instanceof StreamOffset s ? s : parse(offset.json());
  }
}
