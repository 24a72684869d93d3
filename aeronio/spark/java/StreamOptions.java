package io.aeronio.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * A streaming read's options, checked as aeronio/spark/options.py checks them (streaming=True),
 * with the same messages: the options common to both reads (ReadOptions), starting_positions and
 * max_bytes_per_trigger.
 */
final class StreamOptions {
  static final long EARLIEST = -2, LATEST = -1; // in starting_positions JSON, as Kafka's
  /** A batch read's options that are not a streaming read's. */
  static final List<String> BATCH_ONLY =
      List.of(
          "start_position", "end_position", "archive_control", "archive_control_stream_id",
          "archive_timeout");

  final ReadOptions read;
  final String starting; // earliest or latest; null: startingPositions
  final Map<Long, Long> startingPositions; // id -> position, EARLIEST or LATEST
  final Long maxBytesPerTrigger; // null: all there is

  StreamOptions(Map<String, String> options) {
    Set<String> misplaced = new TreeSet<>();
    for (String k : options.keySet()) {
      if (BATCH_ONLY.contains(k)) {
        misplaced.add(k);
      }
    }
    if (!misplaced.isEmpty()) {
      throw Archive.error(
          "option(s) " + String.join(", ", misplaced)
              + " are for a batch read, not a streaming read");
    }
    List<String> known = new ArrayList<>(ReadOptions.BATCH);
    known.removeAll(BATCH_ONLY);
    known.addAll(ReadOptions.STREAM_ONLY);
    ReadOptions.checkNames(options, known, "a streaming read");
    read = ReadOptions.batch(common(options));
    String value = options.get("starting_positions");
    starting = named(value);
    startingPositions = starting == null ? positions(value) : null;
    maxBytesPerTrigger = ReadOptions.size(options, "max_bytes_per_trigger");
  }

  /**
   * Checks the values of options of either kind of read (the names are checked), as
   * options.read_options(options, None) does.
   */
  static void check(Map<String, String> options) {
    ReadOptions.of(common(options));
    String value = options.get("starting_positions");
    if (named(value) == null) {
      positions(value);
    }
    ReadOptions.size(options, "max_bytes_per_trigger");
  }

  /** earliest or latest, as option starting_positions `value` names it; null: JSON. */
  private static String named(String value) {
    String text = value == null ? "earliest" : value.strip().toLowerCase();
    return text.equals("earliest") || text.equals("latest") ? text : null;
  }

  /** The options without the streaming read's own. */
  private static Map<String, String> common(Map<String, String> options) {
    Map<String, String> out = new HashMap<>(options);
    out.keySet().removeAll(ReadOptions.STREAM_ONLY);
    return out;
  }

  private static Map<Long, Long> positions(String value) {
    Map<Long, Long> out = new LinkedHashMap<>();
    try {
      JsonNode root = new ObjectMapper().readTree(value);
      if (root == null || !root.isObject()) {
        throw new IllegalArgumentException();
      }
      for (Iterator<Map.Entry<String, JsonNode>> it = root.fields(); it.hasNext(); ) {
        Map.Entry<String, JsonNode> e = it.next();
        JsonNode v = e.getValue();
        // a JSON integer of 64 bits or a string of one: a fraction or 1e3 is refused, not cut
        long position =
            v.isIntegralNumber() && v.canConvertToLong()
                ? v.asLong()
                : v.isTextual() ? Long.parseLong(v.asText().strip()) : bad();
        out.put(Long.parseLong(e.getKey().strip()), position);
      }
    } catch (IOException | IllegalArgumentException e) {
      throw Archive.error(
          "option starting_positions: " + Archive.repr(value) + " is not earliest, latest or a JSON object"
              + " {\"<recording id>\": <position, -2 earliest, -1 latest>}");
    }
    for (Map.Entry<Long, Long> e : out.entrySet()) {
      if (e.getValue() < EARLIEST) {
        throw Archive.error(
            "option starting_positions: recording " + e.getKey() + ": position " + e.getValue()
                + " is negative (-2 is earliest, -1 latest)");
      }
    }
    return out;
  }

  private static long bad() {
    throw new IllegalArgumentException();
  }

  /** Whether the options select recording `r` (recording_ids, channel, stream_id). */
  boolean selects(Archive.Recording r) {
    return (read.recordingIds == null || read.recordingIds.contains(r.recordingId()))
        && (read.channel == null || r.channel().contains(read.channel))
        && (read.streamId == null || r.streamId() == read.streamId);
  }
}
