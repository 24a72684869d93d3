package io.aeronio.spark;

import java.io.IOException;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reads one partition: walks the frames of its segment file from a frame boundary and turns the
 * messages that start in [emitFrom, emitTo) into columnar batches (Columns).
 *
 * <h2>Frames</h2>
 * A recording's bytes are its stream's terms verbatim: frames of a 32-byte header (frame length
 * i32, version u8, flags u8, type u16, term offset i32, session id i32, stream id i32, term id
 * i32, reserved value i64) and a payload, aligned to 32 bytes. A header is trusted when its
 * length fits the term and its term offset and term id are those of its position; the walk ends
 * at the first that is not (a zero length: not written yet). PAD frames are skipped.
 *
 * <h2>Messages</h2>
 * A DATA frame with BEGIN (0x80) starts a message, one with END (0x40) ends it; fragments of a
 * message are contiguous DATA frames of one term. Fragments without their BEGIN, a message
 * without its END (broken by a BEGIN, another frame or its term's end) and a frame neither DATA
 * nor PAD are no message: recorded terms hold none, so each is damage (Loss), but for the
 * fragments a walk that starts mid-term (a stream's offset) meets first, and a message still open
 * where the recording ends. A message belongs to the partition where it starts, so the walk goes
 * on past emitTo to finish one.
 *
 * <h2>Loss</h2>
 * Whole frames must be recorded to the end of the term holding emitTo - 1 (or to readLimit), as
 * the Python reader checks them. When they are not (a segment file missing or cut short, a
 * damaged header), the read fails naming the position, or with fail_on_data_loss false it logs a
 * warning and ends the partition there; frames that are no message fail it the same way, or are
 * skipped with a warning. A file cut under the walk faults here and is that loss.
 * Records are read in place after the walk (Columns, Aggregates): a file cut between a batch's
 * walk and those reads faults there, and the task fails with the JVM's InternalError ("a fault
 * occurred in an unsafe memory access"), whatever fail_on_data_loss says. aeronio's archive
 * never shortens a segment file (a truncation zeroes the rest of the segment holding its
 * position and deletes the later ones, whose mappings stay readable): it takes a file cut by
 * another hand.
 */
final class PartReader implements PartitionReader<ColumnarBatch> {
  private static final Logger LOG = LoggerFactory.getLogger("aeronio.spark");
  // The recorded frame format: aeronio/archive/segments.py's names and values (a test compares
  // them, tests/unit/test_segment_format.py).
  private static final int HEADER_LENGTH = 32;
  private static final int FRAME_ALIGNMENT = 32;
  private static final int FLAGS_FIELD_OFFSET = 5;
  private static final int TYPE_FIELD_OFFSET = 6;
  private static final int TERM_OFFSET_FIELD_OFFSET = 8;
  private static final int TERM_ID_FIELD_OFFSET = 20;
  private static final int RESERVED_VALUE_FIELD_OFFSET = 24;
  private static final int HDR_TYPE_PAD = 0, HDR_TYPE_DATA = 1;
  private static final int BEGIN_FRAG_FLAG = 0x80, END_FRAG_FLAG = 0x40;

  private final Part part;
  private final ReadPlan plan;
  private final MappedByteBuffer bytes; // the file, mapped (null: missing)
  private final long address; // of scanFrom's byte in it, read through Mapped while held
  private int limit; // the bytes from there
  private long fileSize;
  private final long walkEnd; // frames are checked to here, messages finished past it
  private final Columns columns;
  private final ColumnarBatch batch;
  private final int termShift;
  private long position; // the next frame's
  private long messageStart = -1; // the position of the message being assembled, else -1
  private boolean orphaned; // the last frame was a fragment without its BEGIN, not the last
  private int messageLength;
  private int rows; // in the batch
  private boolean ended;

  PartReader(Part part, StructType schema, ReadPlan plan) {
    this.part = part;
    this.plan = plan;
    this.position = part.scanFrom();
    this.termShift = Integer.numberOfTrailingZeros(part.termLength());
    long lastTermEnd = ((part.emitTo() - 1) | (part.termLength() - 1)) + 1;
    this.walkEnd = Math.min(part.readLimit(), Math.max(part.emitTo(), lastTermEnd));
    this.bytes = map(part);
    this.address = bytes == null ? 0 : Mapped.address(bytes) + (part.scanFrom() - part.filePosition());
    this.columns = new Columns(schema, plan, part, bytes);
    this.batch = new ColumnarBatch(columns.vectors());
  }

  /** The segment file, mapped (SegmentMaps), `limit` set to the bytes read from scanFrom. */
  private MappedByteBuffer map(Part part) {
    Path path = Path.of(part.file());
    try (FileChannel file = FileChannel.open(path, StandardOpenOption.READ)) {
      long size = file.size();
      fileSize = size;
      long from = part.scanFrom() - part.filePosition();
      limit = (int) Math.max(0, Math.min(part.readLimit() - part.filePosition(), size) - from);
      return SegmentMaps.map(path, file, size);
    } catch (NoSuchFileException e) {
      lost(
          "segment file "
              + part.file()
              + " is missing (positions "
              + part.scanFrom()
              + ".."
              + part.readLimit()
              + " are gone)");
      return null;
    } catch (IOException e) {
      throw new RuntimeException("aeronio: cannot read segment file " + part.file() + ": " + e, e);
    }
  }

  /** Fails the read with `why`, or (fail_on_data_loss false) warns and ends the partition. */
  private void lost(String why) {
    String problem =
        "recording "
            + part.recordingId()
            + ": "
            + why
            + ", though the query reads to "
            + part.readLimit()
            + ": the recording was truncated under the query, or the segment is damaged";
    if (plan.failOnDataLoss) {
      throw new IllegalStateException(
          "aeronio DataLossError: " + problem + " (option fail_on_data_loss false skips it)");
    }
    LOG.warn("{}; skipping the rest of this partition", problem);
    ended = true;
  }

  @Override
  public boolean next() {
    if (ended || bytes == null) {
      return false;
    }
    rows = 0;
    try {
      walk();
    } catch (InternalError e) { // a fault in the mapped file: it was cut under the query
      lost("segment file " + part.file() + " was cut short while it was read (" + e + ")");
    }
    batch.setNumRows(rows);
    return rows > 0;
  }

  /** Walks frames into the batch until it is full or the partition ends. */
  private void walk() {
    while (rows < plan.batchRows && !ended) {
      if (messageStart >= 0 && (position & (part.termLength() - 1)) == 0) {
        broken(messageStart); // open at its term's end: a message never crosses a term
        messageStart = -1;
      }
      if (position >= walkEnd && messageStart < 0) {
        ended = true;
        break;
      }
      if (position >= part.readLimit()) {
        ended = true; // a message still open at the recorded end is not a message
        break;
      }
      int at = (int) (position - part.scanFrom());
      int length = frameLength(at);
      if (length < 0) {
        lost(shortWhy(at));
        break;
      }
      long frame = address + at;
      int aligned = (length + FRAME_ALIGNMENT - 1) & -FRAME_ALIGNMENT;
      int type = Mapped.getShort(null, frame + TYPE_FIELD_OFFSET) & 0xffff;
      if ((position & (part.termLength() - 1)) == 0) {
        orphaned = false;
      }
      if (type != HDR_TYPE_DATA) {
        if (messageStart >= 0) {
          broken(messageStart); // a PAD (or another frame) ends no message: it breaks it
        }
        if (type != HDR_TYPE_PAD) {
          broken(position);
        }
        messageStart = -1;
        orphaned = false;
      } else {
        int flags = Mapped.getByte(null, frame + FLAGS_FIELD_OFFSET) & 0xff;
        if ((flags & BEGIN_FRAG_FLAG) != 0) {
          if (messageStart >= 0) {
            broken(messageStart);
          }
          messageStart = position;
          messageLength = 0;
          orphaned = false;
        } else if (messageStart < 0) {
          // A fragment without its BEGIN: the first of a run breaks a message, unless the
          // walk started at it, mid-term (a stream's offset may be inside a message).
          if (!orphaned && !(position == part.scanFrom() && (position & (part.termLength() - 1)) != 0)) {
            broken(position);
          }
          orphaned = (flags & END_FRAG_FLAG) == 0;
        }
        if (messageStart >= 0) {
          int payload = length - HEADER_LENGTH;
          if ((flags & (BEGIN_FRAG_FLAG | END_FRAG_FLAG)) == (BEGIN_FRAG_FLAG | END_FRAG_FLAG)) {
            columns.whole(rows, frame + HEADER_LENGTH, payload);
          } else {
            columns.fragment(rows, messageLength, frame + HEADER_LENGTH, payload);
          }
          messageLength += payload;
          if ((flags & END_FRAG_FLAG) != 0) {
            if (messageStart >= part.emitFrom() && messageStart < part.emitTo()) {
              if (plan.recordSize > 0 && messageLength != plan.recordSize) {
                throw new IllegalArgumentException(
                    "aeronio SourceError: layout fixed: the message at position "
                        + messageStart
                        + " of recording "
                        + part.recordingId()
                        + " is "
                        + messageLength
                        + " bytes, the record "
                        + plan.recordNames
                        + " is "
                        + plan.recordSize
                        + " bytes");
              }
              columns.message(
                  rows, messageStart, messageLength,
                  Mapped.getLong(null, frame + RESERVED_VALUE_FIELD_OFFSET));
              rows++;
            }
            messageStart = -1;
          }
        }
      }
      position += aligned;
    }
  }

  /**
   * The frames at `at` (a message's start, the partition's when in [emitFrom, emitTo)) are no
   * whole message: a damaged segment. Fails the read, or (fail_on_data_loss false) warns and
   * skips them (reader._broken's words).
   */
  private void broken(long at) {
    if (at < part.emitFrom() || at >= part.emitTo()) {
      return;
    }
    String problem =
        "recording "
            + part.recordingId()
            + ": the frames at position "
            + at
            + " of "
            + part.file()
            + " are not a whole message (a fragment without its first or last, or a frame of"
            + " unknown type): the segment is damaged";
    if (plan.failOnDataLoss) {
      throw new IllegalStateException(
          "aeronio DataLossError: " + problem + " (option fail_on_data_loss false skips it)");
    }
    LOG.warn("{}; skipping it", problem);
  }

  /** The length of the frame at `at` when its header is whole and trusted there, else -1. */
  private int frameLength(int at) {
    if (at + HEADER_LENGTH > limit) {
      return -1;
    }
    long frame = address + at;
    int length = Mapped.getInt(null, frame);
    int termOffset = (int) (position & (part.termLength() - 1));
    int termId = part.initialTermId() + (int) (position >> termShift);
    if (length < HEADER_LENGTH
        || length > part.termLength() - termOffset
        || Mapped.getInt(null, frame + TERM_OFFSET_FIELD_OFFSET) != termOffset
        || Mapped.getInt(null, frame + TERM_ID_FIELD_OFFSET) != termId
        || (long) at + ((length + FRAME_ALIGNMENT - 1) & -FRAME_ALIGNMENT) > limit) {
      return -1;
    }
    return length;
  }

  private String shortWhy(int at) {
    if (part.filePosition() + fileSize < part.readLimit()) {
      return "segment file "
          + part.file()
          + " is cut short ("
          + fileSize
          + " of "
          + (part.readLimit() - part.filePosition())
          + " bytes)";
    }
    return "no whole frame at position " + position + " of " + part.file();
  }

  /** The position of row `row`'s message in the current batch. */
  long positionOf(int row) {
    return columns.position(row);
  }

  /** The addresses of the current batch's records, by row (layout fixed). */
  long[] addresses() {
    return columns.addresses();
  }

  @Override
  public ColumnarBatch get() {
    return batch;
  }

  @Override
  public void close() {
    batch.close();
  }
}
