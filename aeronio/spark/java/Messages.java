package io.aeronio.spark;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;

/**
 * Where a recording's messages begin and end, found by walking its frames, as
 * aeronio/spark/recordings.py finds them (last_boundary, first_boundary_after, is_message_start)
 * for a streaming read's offsets: every term start (and the recording's start) is a message
 * boundary; any other is the start of a BEGIN frame, or the end of an END frame or a PAD, found
 * by walking whole frames from a boundary (PartReader's header checks).
 */
final class Messages {
  private static final int HEADER_LENGTH = 32, FRAME_ALIGNMENT = 32;
  private static final int HDR_TYPE_PAD = 0, HDR_TYPE_DATA = 1;
  private static final int BEGIN_FRAG_FLAG = 0x80, END_FRAG_FLAG = 0x40;
  private static final long MAP_FROM = 16 * 1024; // bytes: a larger range is mapped

  private Messages() {}

  /** The nearest message boundary at or before `position` known without a walk. */
  static long known(Archive.Recording r, long position) {
    return Math.max(r.termBase(position), r.startPosition());
  }

  /**
   * The recording's bytes [from, to) (within a segment); null when not all are recorded. A
   * range of more than a few pages is mapped, not copied: a walk to a term's end reads its
   * headers only.
   */
  private static ByteBuffer bytes(Path archive, Archive.Recording r, long from, long to) {
    long index = r.segmentIndex(from);
    Path file = archive.resolve(r.fileName(index));
    try (FileChannel channel = FileChannel.open(file)) {
      long at = from - r.segmentBase(index);
      if (to - from > MAP_FROM) {
        if (channel.size() < at + (to - from)) {
          return null;
        }
        return channel.map(FileChannel.MapMode.READ_ONLY, at, to - from).order(ByteOrder.LITTLE_ENDIAN);
      }
      ByteBuffer out = ByteBuffer.allocate((int) (to - from)).order(ByteOrder.LITTLE_ENDIAN);
      while (out.hasRemaining()) {
        if (channel.read(out, at + out.position()) < 0) {
          return null;
        }
      }
      return out.clear();
    } catch (NoSuchFileException e) {
      return null;
    } catch (IOException e) {
      throw Archive.error("cannot read segment file " + file + ": " + e);
    }
  }

  /** The bytes [from, to), or the DataLossError of recordings.read_bytes, in its words. */
  private static ByteBuffer needed(Path archive, Archive.Recording r, long from, long to) {
    ByteBuffer b = bytes(archive, r, from, to);
    if (b == null) {
      Path file = archive.resolve(r.fileName(r.segmentIndex(from)));
      long offset = from - r.segmentBase(r.segmentIndex(from));
      String gone =
          !Files.exists(file)
              ? " is missing (positions " + from + ".." + to + " are gone)"
              : " is cut short: " + Math.max(offset, file.toFile().length())
                  + " bytes, positions up to " + to + " need " + (offset + to - from);
      throw new IllegalStateException(
          "aeronio DataLossError: recording " + r.recordingId() + ": segment file " + file + gone);
    }
    return b;
  }

  /** The length of the frame at `at` of `b` (stream position `position`) if trusted, else -1. */
  private static int frameLength(ByteBuffer b, int at, long position, Archive.Recording r) {
    if (at + HEADER_LENGTH > b.limit()) {
      return -1;
    }
    int length = b.getInt(at);
    int termOffset = (int) (position & (r.termLength() - 1));
    int termId =
        r.initialTermId() + (int) (position >> Integer.numberOfTrailingZeros(r.termLength()));
    boolean ok =
        length >= HEADER_LENGTH
            && length <= r.termLength() - termOffset
            && b.getInt(at + 8) == termOffset
            && b.getInt(at + 20) == termId;
    return ok ? length : -1;
  }

  /** Whether a frame header for `position` is recorded there. */
  static boolean isFrameAt(Path archive, Archive.Recording r, long position) {
    ByteBuffer b = bytes(archive, r, position, position + HEADER_LENGTH);
    return b != null && frameLength(b, 0, position, r) >= 0;
  }

  /** Whether `position` is a known boundary or a BEGIN or PAD frame is recorded there. */
  static boolean isMessageStart(Path archive, Archive.Recording r, long position) {
    if (position == known(r, position)) {
      return true;
    }
    ByteBuffer b = bytes(archive, r, position, position + HEADER_LENGTH);
    if (b == null || frameLength(b, 0, position, r) < 0) {
      return false;
    }
    int type = b.getShort(6) & 0xffff;
    return type == HDR_TYPE_PAD || (type == HDR_TYPE_DATA && (b.get(5) & BEGIN_FRAG_FLAG) != 0);
  }

  /**
   * The message boundaries after `from` (a boundary) of the whole frames in [from, to), in
   * order, to `visit` until it returns false.
   */
  private static void walk(Path archive, Archive.Recording r, long from, long to, Visit visit) {
    ByteBuffer b = needed(archive, r, from, to);
    int at = 0;
    try {
      while (true) {
        long position = from + at;
        int length = frameLength(b, at, position, r);
        int aligned = (length + FRAME_ALIGNMENT - 1) & -FRAME_ALIGNMENT;
        if (length < 0 || at + aligned > b.limit()) {
          return;
        }
        int type = b.getShort(at + 6) & 0xffff, flags = b.get(at + 5) & 0xff;
        boolean data = type == HDR_TYPE_DATA;
        if (data && (flags & BEGIN_FRAG_FLAG) != 0 && position > from && !visit.at(position)) {
          return;
        }
        if ((type == HDR_TYPE_PAD || (data && (flags & END_FRAG_FLAG) != 0))
            && !visit.at(position + aligned)) {
          return;
        }
        at += aligned;
      }
    } catch (InternalError e) { // a fault in a mapped range: the file was cut, the walk ends
    }
  }

  private interface Visit {
    boolean at(long boundary);
  }

  /**
   * The greatest message boundary in [low, target] (`low` a boundary, whole frames up to
   * `target`); `low` when there is none past it.
   */
  static long lastBoundary(Path archive, Archive.Recording r, long low, long target) {
    if (target <= low) {
      return low;
    }
    if (target == r.termBase(target) && target >= r.startPosition()) {
      return target;
    }
    long start = known(r, target);
    if (start <= low) {
      start = isMessageStart(archive, r, low) ? low : known(r, low);
    }
    long[] last = {Math.max(low, start)};
    walk(archive, r, start, target, b -> {
      if (b >= low && b <= target) {
        last[0] = Math.max(last[0], b);
      }
      return true;
    });
    return last[0];
  }

  /**
   * The first message boundary after `low` up to `limit`, or `low` when no message or PAD ends
   * before `limit`. `low` may be inside a message (a stream's starting position): the frames are
   * then walked from the term's start.
   */
  static long firstBoundaryAfter(Path archive, Archive.Recording r, long low, long limit) {
    long end = Math.min(limit, r.termEnd(low));
    if (end <= low) {
      return low;
    }
    long start = isMessageStart(archive, r, low) ? low : known(r, low); // low inside a message
    long[] first = {low};
    walk(archive, r, start, end, b -> {
      if (b > low) {
        first[0] = b;
        return false;
      }
      return true;
    });
    return first[0];
  }

  /**
   * The next offset of a recording read from `position` with whole frames to `end`: the last
   * message boundary within `allotment` bytes, or the end of the first message when not even
   * that fits (a trigger always moves on while there is a whole message): reader.advance.
   */
  static long advance(Path archive, Archive.Recording r, long position, long end, long allotment) {
    if (end <= position) {
      return position;
    }
    long found = lastBoundary(archive, r, position, Math.min(end, position + allotment));
    if (found > position) {
      return found;
    }
    return firstBoundaryAfter(archive, r, position, end);
  }
}
