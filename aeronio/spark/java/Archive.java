package io.aeronio.spark;

import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What the JVM source knows of an archive directory, read from its files as
 * aeronio/spark/recordings.py and reader.py read them: the recordings of its catalog, how far
 * each is readable (stop position, `rec-pos` counter in the driver's cnc.dat, or the last whole
 * frame of its last segment), and the partitions of a batch read (one per segment, or per run
 * of whole terms of at most max_partition_bytes; each scans from a term's start, a message
 * boundary).
 *
 * <p>The file formats are aeronio/archive's (catalog.py, segments.py, recording_pos.py) and
 * aeronio/counters': fixed, Aeron 1.15.1's.
 */
final class Archive {
  private static final Logger LOG = LoggerFactory.getLogger("aeronio.spark");
  static final String CATALOG_FILE_NAME = "archive.catalog";
  private static final int RECORD_LENGTH = 1024;
  private static final int BODY = 32; // the descriptor header before a descriptor's body
  private static final int DESCRIPTOR_BLOCK_LENGTH = 80;
  private static final int FRAME_ALIGNMENT = 32;
  private static final int MIN_TERM_LENGTH = 64 * 1024, MAX_TERM_LENGTH = 1024 * 1024 * 1024;
  // cnc.dat: a 128-byte header of buffer lengths, then the buffers in this order.
  private static final int CNC_HEADER_LENGTH = 128;
  private static final int COUNTER_METADATA_LENGTH = 512, COUNTER_VALUE_LENGTH = 128;
  private static final int RECORD_ALLOCATED = 1, RECORD_UNUSED = 0;
  private static final int RECORDING_POSITION_TYPE_ID = 100;
  // Acquire loads of what a writer publishes with ordered stores (catalog, counters, frames).
  private static final VarHandle INT =
      MethodHandles.byteBufferViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);
  private static final VarHandle LONG =
      MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);

  private static int intAcquire(ByteBuffer b, int at) {
    return (int) INT.getAcquire(b, at);
  }

  private static long longAcquire(ByteBuffer b, int at) {
    return (long) LONG.getAcquire(b, at);
  }

  /** A recording's descriptor, as much of it as reading needs. */
  record Recording(
      long recordingId,
      int sessionId,
      int streamId,
      String channel,
      long startPosition,
      long stopPosition, // -1 while recording
      int initialTermId,
      int termLength,
      int segmentLength) {
    boolean active() {
      return stopPosition < 0;
    }

    long basePosition() {
      return startPosition - (startPosition & (termLength - 1));
    }

    long termBase(long position) {
      return position - (position & (termLength - 1));
    }

    long termEnd(long position) {
      return termBase(position) + termLength;
    }

    long segmentIndex(long position) {
      return (position - basePosition()) / segmentLength;
    }

    long segmentBase(long index) {
      return basePosition() + index * segmentLength;
    }

    String fileName(long index) {
      return recordingId + "-" + index + ".rec";
    }
  }

  private Archive() {}

  /**
   * A SourceError of the Python source (a bad option, a missing or corrupt archive, a message
   * that does not decode): a JDK exception, which Spark's driver deserializes whatever jars it
   * knows; its message's prefix is what aeronio.spark.captured raises as SourceError (as
   * "aeronio DataLossError: " as DataLossError).
   */
  static IllegalArgumentException error(String message) {
    return new IllegalArgumentException("aeronio SourceError: " + message);
  }

  /** `value` as Python's repr of its string quotes it (the Python source's messages' {x!r}). */
  static String repr(Object value) {
    String text = String.valueOf(value);
    char quote = text.indexOf('\'') >= 0 && text.indexOf('"') < 0 ? '"' : '\'';
    StringBuilder out = new StringBuilder().append(quote);
    text.codePoints().forEach(c -> {
      switch (c) {
        case '\\' -> out.append("\\\\");
        case '\t' -> out.append("\\t");
        case '\n' -> out.append("\\n");
        case '\r' -> out.append("\\r");
        default -> {
          if (c == quote) {
            out.append('\\').append(quote);
          } else if (printable(c)) {
            out.appendCodePoint(c);
          } else {
            out.append(c < 0x100 ? String.format("\\x%02x", c)
                : c < 0x10000 ? String.format("\\u%04x", c) : String.format("\\U%08x", c));
          }
        }
      }
    });
    return out.append(quote).toString();
  }

  /** As Python's str.isprintable: not a control, format, surrogate, private, unassigned or
   * separator character (but the space). */
  private static boolean printable(int c) {
    return switch (Character.getType(c)) {
      case Character.CONTROL, Character.FORMAT, Character.SURROGATE, Character.PRIVATE_USE,
          Character.UNASSIGNED, Character.LINE_SEPARATOR, Character.PARAGRAPH_SEPARATOR -> false;
      case Character.SPACE_SEPARATOR -> c == ' ';
      default -> true;
    };
  }

  /** Every valid recording of the catalog, in id order; a corrupt entry is logged, skipped. */
  static List<Recording> recordings(Path archive) {
    return recordings(archive, new HashSet<>());
  }

  /** As recordings(archive), adding the ids of the corrupt entries skipped to `corrupt`. */
  static List<Recording> recordings(Path archive, Set<Long> corrupt) {
    if (!Files.isDirectory(archive)) {
      throw error("archive directory " + repr(archive) + " does not exist");
    }
    Path path = archive.resolve(CATALOG_FILE_NAME);
    if (!Files.exists(path)) {
      throw error("no archive catalog in " + repr(archive) + " (" + CATALOG_FILE_NAME + " missing)");
    }
    ByteBuffer catalog = map(path, "archive catalog in " + repr(archive) + " cannot be read: ");
    String cannot = "archive catalog in " + repr(archive) + " cannot be read: ";
    if (catalog.limit() < 2 * RECORD_LENGTH) {
      throw error(cannot + path + ": " + catalog.limit() + " bytes is too short for a catalog");
    }
    int version = catalog.getInt(0), entryLength = catalog.getInt(4);
    if (version != 0 || entryLength != RECORD_LENGTH) {
      throw error(
          cannot + path + ": version " + version + ", entry length " + entryLength
              + " (this archive reads version 0, entries of " + RECORD_LENGTH + ")");
    }
    int count = catalog.limit() / RECORD_LENGTH - 1;
    while (count > 0 && intAcquire(catalog, count * RECORD_LENGTH) == 0) {
      count--; // one past the last record with a length
    }
    List<Recording> out = new ArrayList<>();
    for (int id = 0; id < count; id++) {
      int at = (id + 1) * RECORD_LENGTH;
      int length = intAcquire(catalog, at);
      if (length != 0 && catalog.get(at + 4) == 0) {
        continue; // invalidated (a flag neither 0 nor 1 is damage descriptor() names)
      }
      try {
        out.add(descriptor(catalog, path, id, at, length));
      } catch (IllegalArgumentException e) {
        LOG.warn("skipping a recording: {}", e.getMessage());
        corrupt.add((long) id);
      }
    }
    return out;
  }

  private static Recording descriptor(ByteBuffer c, Path path, int id, int at, int length) {
    String corrupt = path + ": recording " + id + " has a corrupt catalog entry:";
    if (length == 0) {
      throw error(corrupt + " zeroed, with recordings after it");
    }
    if (length < DESCRIPTOR_BLOCK_LENGTH || length > RECORD_LENGTH - BODY) {
      throw error(corrupt + " descriptor length " + length);
    }
    if (c.get(at + 4) != 1) {
      throw error(corrupt + " valid flag " + c.get(at + 4));
    }
    int b = at + BODY;
    if (c.getLong(b + 16) != id) {
      throw error(corrupt + " its descriptor is recording " + c.getLong(b + 16) + "'s");
    }
    long start = c.getLong(b + 40);
    long stop = longAcquire(c, b + 48);
    int term = c.getInt(b + 64), segment = c.getInt(b + 60);
    String[] strings = new String[3]; // stripped channel, original channel, source identity
    int s = b + DESCRIPTOR_BLOCK_LENGTH;
    for (int i = 0; i < 3; i++) {
      int n = s + 4 <= b + length ? c.getInt(s) : -1;
      if (n < 0 || s + 4 + n > b + length) {
        throw error(corrupt + " the descriptor does not decode");
      }
      byte[] text = new byte[n];
      c.get(s + 4, text);
      strings[i] = new String(text, StandardCharsets.UTF_8);
      s += 4 + n;
    }
    boolean termOk = term >= MIN_TERM_LENGTH && term <= MAX_TERM_LENGTH && Integer.bitCount(term) == 1;
    if (!termOk || segment < term || segment % term != 0 || Integer.bitCount(segment / term) != 1) {
      throw error(corrupt + " term length " + term + ", segment file length " + segment);
    }
    if (start < 0 || start % FRAME_ALIGNMENT != 0) {
      throw error(corrupt + " start position " + start + " is not a frame aligned position");
    }
    if (stop != -1 && (stop < start || stop % FRAME_ALIGNMENT != 0)) {
      throw error(corrupt + " stop position " + stop + " is not a frame aligned position");
    }
    return new Recording(
        c.getLong(b + 16), c.getInt(b + 72), c.getInt(b + 76), strings[1], start, stop,
        c.getInt(b + 56), term, segment);
  }

  /** The file mapped read-only, little-endian (getLongOpaque: what a writer published). */
  private static ByteBuffer map(Path path, String what) {
    try (FileChannel file = FileChannel.open(path, StandardOpenOption.READ)) {
      MappedByteBuffer mapped = file.map(FileChannel.MapMode.READ_ONLY, 0, file.size());
      return mapped.order(ByteOrder.LITTLE_ENDIAN);
    } catch (IOException e) {
      throw error(what + e);
    }
  }

  /** Recording id to position recorded so far, of the `rec-pos` counters in driverDir. */
  static Map<Long, Long> recordingPositions(Path driverDir) {
    Path cnc = driverDir.resolve("cnc.dat");
    if (!Files.exists(cnc)) {
      throw error("driver_dir " + repr(driverDir) + " has no media driver counters (cnc.dat missing)");
    }
    ByteBuffer b = map(cnc, "driver_dir " + repr(driverDir) + ": ");
    if (b.limit() < CNC_HEADER_LENGTH || intAcquire(b, 0) == 0) {
      throw error("driver_dir " + repr(driverDir) + ": cnc.dat is not ready");
    }
    long metadata = CNC_HEADER_LENGTH + (long) b.getInt(4) + b.getInt(8);
    long values = metadata + b.getInt(12);
    int counters = b.getInt(12) / COUNTER_METADATA_LENGTH;
    if (values + b.getInt(16) > b.limit() || counters > b.getInt(16) / COUNTER_VALUE_LENGTH) {
      throw error("driver_dir " + repr(driverDir) + ": cnc.dat is shorter than its buffers");
    }
    Map<Long, Long> out = new HashMap<>();
    for (int id = 0; id < counters; id++) {
      int record = (int) metadata + id * COUNTER_METADATA_LENGTH;
      int state = intAcquire(b, record);
      if (state == RECORD_UNUSED) {
        break;
      }
      if (state == RECORD_ALLOCATED && b.getInt(record + 4) == RECORDING_POSITION_TYPE_ID) {
        out.put(b.getLong(record + 16), longAcquire(b, (int) values + id * COUNTER_VALUE_LENGTH));
      }
    }
    return out;
  }

  /** Where whole frames end: the stop position, the rec-pos counter, or a scan. */
  static long readableEnd(Path archive, Recording r, Map<Long, Long> positions) {
    if (!r.active()) {
      return r.stopPosition();
    }
    if (positions != null && positions.containsKey(r.recordingId())) {
      return Math.max(positions.get(r.recordingId()), r.startPosition());
    }
    long index = r.segmentIndex(r.startPosition());
    while (Files.exists(archive.resolve(r.fileName(index + 1)))) {
      index++;
    }
    return writtenEnd(archive, r, index);
  }

  /** The end of the last whole frame in the last started term of segment `index`. */
  private static long writtenEnd(Path archive, Recording r, long index) {
    long base = r.segmentBase(index);
    long first = Math.max(base, r.startPosition());
    ByteBuffer b;
    try (FileChannel file = FileChannel.open(archive.resolve(r.fileName(index)))) {
      long size = Math.min(file.size(), r.segmentLength());
      if (size <= first - base) {
        return first;
      }
      b = file.map(FileChannel.MapMode.READ_ONLY, 0, size).order(ByteOrder.LITTLE_ENDIAN);
    } catch (NoSuchFileException e) {
      return first;
    } catch (IOException e) {
      throw error("cannot read segment file " + archive.resolve(r.fileName(index)) + ": " + e);
    }
    int size = b.limit();
    int term = r.termLength();
    int start = -1;
    for (long at = first - base; at + 4 <= size; at = (at - at % term) + term) {
      if (intAcquire(b, (int) at) != 0) {
        start = (int) at;
      }
    }
    if (start < 0) {
      return first;
    }
    int stop = (int) Math.min(start - start % term + (long) term, size);
    int at = start;
    while (at + 4 <= stop) {
      int length = intAcquire(b, at);
      int aligned = (length + FRAME_ALIGNMENT - 1) & -FRAME_ALIGNMENT;
      if (length <= 0 || at + (long) aligned > stop) {
        break;
      }
      at += aligned;
    }
    return base + at;
  }

  /**
   * The partitions of recording `r` for messages that start in [low, high): one per segment,
   * or per run of whole terms of at most maxBytes (at least a term) within a segment; each reads to the end of
   * its last term (or readLimit), from the start of its first term.
   */
  static List<Part> split(
      Path archive, Recording r, long low, long high, long readLimit, Long maxBytes) {
    List<Part> parts = new ArrayList<>();
    long step = r.segmentLength();
    if (maxBytes != null) {
      step = Math.min(step, Math.max(r.termLength(), maxBytes - maxBytes % r.termLength()));
    }
    long base = r.basePosition();
    while (low < high) {
      long next =
          Math.min(
              Math.min(high, base + ((low - base) / step + 1) * step),
              r.segmentBase(r.segmentIndex(low) + 1));
      long limit = Math.min(readLimit, r.termEnd(next - 1));
      long scanFrom = Math.max(r.termBase(low), r.startPosition());
      long index = r.segmentIndex(scanFrom);
      parts.add(
          new Part(
              archive.resolve(r.fileName(index)).toString(), r.segmentBase(index),
              r.recordingId(), r.sessionId(), r.streamId(), r.channel(), r.termLength(),
              r.initialTermId(), scanFrom, low, next, limit));
      low = next;
    }
    return parts;
  }
}
