package io.aeronio.spark;

import java.math.BigInteger;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxBytes;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.StructType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * `spark.readStream.format("aeronio")` of an archive directory: the Python source's
 * StreamReader (aeronio/spark/source.py) in the JVM, with its offsets (StreamOffset) and errors.
 *
 * <p>Offsets are {recording id: position}: every message that starts before the position has
 * been read. Each trigger re-reads the catalog (new matching recordings start from their first
 * message) and moves each recording to its last message boundary that is recorded, within
 * max_bytes_per_trigger (shared by the recordings in proportion to their backlog). A
 * micro-batch's partitions are Archive.split's between two offsets, read by PartReader (layouts
 * raw and fixed) or JsonRows (json).
 */
final class MicroStream implements MicroBatchStream, SupportsTriggerAvailableNow {
  private static final Logger LOG = LoggerFactory.getLogger("aeronio.spark");
  private final StreamOptions options;
  private final Path archive;
  private final StructType schema;
  private final ReadPlan plan; // without parts: a micro-batch's are planInputPartitions'
  private Map<Long, Long> target; // Trigger.AvailableNow: where each recording ends

  /** Checks the options and the schema (tableSchema: the table's, schema: the columns read). */
  MicroStream(Map<String, String> given, StructType tableSchema, StructType schema) {
    this.options = new StreamOptions(given);
    this.archive = Path.of(options.read.archive).toAbsolutePath();
    this.schema = schema;
    this.plan =
        options.read.plan(
            tableSchema, SQLConf.get().sessionLocalTimeZone(), AeronioSource.batchRows(),
            List.of());
    Archive.recordings(archive); // the archive and its catalog: fails here, on the driver
  }

  /** The recordings the options select, by id. */
  private Map<Long, Archive.Recording> recordings() {
    Map<Long, Archive.Recording> out = new LinkedHashMap<>();
    for (Archive.Recording r : Archive.recordings(archive)) {
      if (options.selects(r)) {
        out.put(r.recordingId(), r);
      }
    }
    return out;
  }

  private Map<Long, Long> recPositions() {
    String dir = options.read.driverDir;
    return dir == null ? null : Archive.recordingPositions(Path.of(dir));
  }

  /** The recording's last message boundary that is recorded (a stopped one's end). */
  private long latest(Archive.Recording r, Map<Long, Long> positions) {
    long end = Archive.readableEnd(archive, r, positions);
    return r.active() ? Messages.lastBoundary(archive, r, Messages.known(r, end), end) : end;
  }

  @Override
  public Offset initialOffset() {
    Set<Long> corrupt = new HashSet<>();
    Archive.recordings(archive, corrupt);
    if (options.read.recordingIds != null) { // one not there yet may come: a corrupt one never
      for (long rid : new TreeSet<>(options.read.recordingIds)) {
        if (corrupt.contains(rid)) {
          throw Archive.error(
              "option recording_ids: recording " + rid + " has a corrupt catalog entry (logged)");
        }
      }
    }
    Map<Long, Archive.Recording> found = recordings();
    Map<Long, Long> positions = recPositions();
    Map<Long, Long> wanted = options.startingPositions;
    if (wanted != null) {
      for (long rid : wanted.keySet()) {
        if (!found.containsKey(rid)) {
          throw Archive.error(
              "option starting_positions: recording " + rid + " is not in the archive's catalog,"
                  + " or the options leave it out");
        }
      }
    }
    Map<Long, Long> out = new TreeMap<>();
    for (Archive.Recording r : found.values()) {
      long rid = r.recordingId();
      long w =
          wanted != null
              ? wanted.getOrDefault(rid, StreamOptions.EARLIEST)
              : options.starting.equals("latest") ? StreamOptions.LATEST : StreamOptions.EARLIEST;
      if (w == StreamOptions.EARLIEST) {
        out.put(rid, r.startPosition());
      } else if (w == StreamOptions.LATEST) {
        out.put(rid, latest(r, positions));
      } else {
        long end = Archive.readableEnd(archive, r, positions);
        if (w < r.startPosition() || w > end) {
          throw Archive.error(
              "option starting_positions: recording " + rid + " holds positions "
                  + r.startPosition() + " to " + end + ", not " + w);
        }
        out.put(rid, w);
      }
    }
    return new StreamOffset(out);
  }

  @Override
  public ReadLimit getDefaultReadLimit() {
    Long max = options.maxBytesPerTrigger;
    return max == null ? ReadLimit.allAvailable() : ReadLimit.maxBytes(max);
  }

  @Override
  public void prepareForTriggerAvailableNow() {
    Map<Long, Long> positions = recPositions();
    target = new HashMap<>();
    for (Archive.Recording r : recordings().values()) {
      target.put(r.recordingId(), latest(r, positions));
    }
  }

  private void lost(String message) {
    if (options.read.failOnDataLoss) {
      throw new IllegalStateException(
          "aeronio DataLossError: " + message + " (option fail_on_data_loss false skips it)");
    }
    LOG.warn("{}; skipping it", message);
  }

  @Override
  public Offset latestOffset() {
    throw new UnsupportedOperationException("aeronio: latestOffset(start, limit) is the one used");
  }

  @Override
  public Offset latestOffset(Offset startOffset, ReadLimit limit) {
    Map<Long, Long> current = StreamOffset.of(startOffset).positions;
    List<Archive.Recording> all = Archive.recordings(archive);
    Map<Long, Archive.Recording> found = new LinkedHashMap<>();
    Map<Long, Archive.Recording> valid = new HashMap<>();
    for (Archive.Recording r : all) {
      valid.put(r.recordingId(), r);
      if (options.selects(r)) {
        found.put(r.recordingId(), r);
      }
    }
    Map<Long, Long> positions = recPositions();
    Map<Long, Long> from = new LinkedHashMap<>(); // recordings read, from these positions
    Map<Long, Long> out = new TreeMap<>();
    for (Map.Entry<Long, Long> e : current.entrySet()) {
      long rid = e.getKey(), position = e.getValue();
      Archive.Recording r = found.get(rid);
      if (r == null) {
        if (valid.containsKey(rid)) {
          out.put(rid, position); // left out by the options now: no longer read
        } else {
          lost(
              "recording " + rid + " is no longer a sound recording of the archive's catalog"
                  + " (deleted, invalidated, or its entry corrupt)");
        }
        continue;
      }
      if (position < r.startPosition()) {
        lost(
            "recording " + rid + " now starts at " + r.startPosition() + ", after the query's"
                + " position " + position);
        position = r.startPosition();
      }
      if (!r.active() && r.stopPosition() < position) {
        lost(
            "recording " + rid + " was truncated to " + r.stopPosition() + ", before the"
                + " query's position " + position);
        out.put(rid, r.stopPosition());
        continue;
      }
      from.put(rid, position);
    }
    for (Archive.Recording r : found.values()) {
      long rid = r.recordingId();
      if (!current.containsKey(rid) && (target == null || target.containsKey(rid))) {
        from.put(rid, r.startPosition()); // a new recording: from its start
      }
    }
    Map<Long, Long> ends = new HashMap<>();
    Map<Long, Long> backlog = new LinkedHashMap<>();
    for (Map.Entry<Long, Long> e : from.entrySet()) {
      long rid = e.getKey(), position = e.getValue();
      Archive.Recording r = found.get(rid);
      long end = Archive.readableEnd(archive, r, positions);
      if (end < position) { // recorded bytes went back: truncated, then extended again
        lost(
            "recording " + rid + " is recorded to " + end + ", before the query's position "
                + position + ": it was truncated and extended under the query (what was"
                + " recorded again below the query's position is skipped)");
        position = Messages.lastBoundary(archive, r, Messages.known(r, end), end);
        e.setValue(position);
      }
      if (target != null) {
        end = Math.min(end, target.getOrDefault(rid, position));
      }
      ends.put(rid, Math.max(end, position));
      backlog.put(rid, Math.max(0, end - position));
    }
    Long budget = limit instanceof ReadMaxBytes m ? m.maxBytes() : null;
    Map<Long, Long> allotted = allot(backlog, budget);
    for (Map.Entry<Long, Long> e : from.entrySet()) {
      long rid = e.getKey();
      out.put(
          rid,
          Messages.advance(archive, found.get(rid), e.getValue(), ends.get(rid), allotted.get(rid)));
    }
    return new StreamOffset(out);
  }

  /**
   * A byte budget split over recordings in proportion to their backlog (all of each when there
   * is no budget or enough of it): reader.allot.
   */
  static Map<Long, Long> allot(Map<Long, Long> backlogs, Long budget) {
    long total = 0;
    for (long b : backlogs.values()) {
      total += b;
    }
    if (budget == null || total <= budget) {
      return backlogs;
    }
    Map<Long, Long> out = new HashMap<>();
    BigInteger all = BigInteger.valueOf(total), share = BigInteger.valueOf(budget);
    backlogs.forEach(
        (rid, b) -> out.put(rid, BigInteger.valueOf(b).multiply(share).divide(all).longValue()));
    return out;
  }

  @Override
  public InputPartition[] planInputPartitions(Offset start, Offset end) {
    Map<Long, Long> begin = StreamOffset.of(start).positions;
    Map<Long, Archive.Recording> found = recordings();
    List<Part> parts = new ArrayList<>();
    for (Map.Entry<Long, Long> e : StreamOffset.of(end).positions.entrySet()) {
      Archive.Recording r = found.get(e.getKey());
      if (r == null) { // gone since the offset was taken (or a restart replans it)
        Long from = begin.get(e.getKey());
        if (from != null && e.getValue() > from) {
          lost(
              "recording " + e.getKey() + " is no longer a sound recording of the archive's"
                  + " catalog: positions " + from + " to " + e.getValue() + " are not read");
        }
        continue;
      }
      long stop = e.getValue(), low = begin.getOrDefault(r.recordingId(), r.startPosition());
      List<Part> split =
          Archive.split(archive, r, low, stop, stop, options.read.maxPartitionBytes);
      if (!split.isEmpty() && split.get(0).scanFrom() < low && Messages.isFrameAt(archive, r, low)) {
        split.set(0, from(split.get(0), low)); // an offset is a boundary: no walk from the term's start
      }
      parts.addAll(split);
    }
    return parts.toArray(new InputPartition[0]);
  }

  private static Part from(Part p, long scanFrom) {
    return new Part(
        p.file(), p.filePosition(), p.recordingId(), p.sessionId(), p.streamId(), p.channel(),
        p.termLength(), p.initialTermId(), scanFrom, p.emitFrom(), p.emitTo(), p.readLimit());
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    return new AeronioSource.Readers(schema, plan);
  }

  @Override
  public Offset deserializeOffset(String json) {
    return StreamOffset.parse(json);
  }

  /** What Spark's progress reports name this source by. */
  @Override
  public String toString() {
    return "aeronio MicroStream " + archive;
  }

  @Override
  public void commit(Offset end) {}

  @Override
  public void stop() {}
}
