package io.aeronio.spark;

import java.io.IOException;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * Segment files mapped once per JVM and shared by the partitions that read them, so that a
 * query, or a micro-batch, that reads a segment read before finds its pages mapped (a fresh
 * mapping costs a page fault per 64 KiB read, and its unmapping after).
 *
 * <h2>Lifecycle</h2>
 * A mapping is the whole file's, kept while the file is the same: the same file (its file key,
 * the device and inode) and the same size, looked up at every map(); otherwise it is mapped
 * anew. At most MOST are kept, the least recently used dropped first, and one unused for IDLE
 * is dropped by a daemon thread that runs while any is kept, so that a segment deleted or
 * replaced is let go within IDLE of its last read. A dropped mapping is unmapped when the
 * collector frees it: a reader holds the mapping it reads (PartReader, Columns), never a
 * dropped one's address alone.
 */
final class SegmentMaps {
  private static final int MOST = 32;
  private static final long IDLE_NS = 10_000_000_000L;

  private record Kept(Object fileKey, long size, MappedByteBuffer bytes, long usedNs) {}

  private static final Map<Path, Kept> KEPT = new LinkedHashMap<>(16, 0.75f, true);
  private static Thread sweeper; // while KEPT has any

  private SegmentMaps() {}

  /** The whole of `file`, open as `channel` and `size` bytes long now, mapped read-only. */
  static synchronized MappedByteBuffer map(Path file, FileChannel channel, long size)
      throws IOException {
    Object fileKey = Files.readAttributes(file, BasicFileAttributes.class).fileKey();
    Kept kept = KEPT.get(file);
    MappedByteBuffer bytes;
    if (kept != null && kept.size() == size && Objects.equals(kept.fileKey(), fileKey)) {
      bytes = kept.bytes();
    } else {
      bytes = channel.map(FileChannel.MapMode.READ_ONLY, 0, size);
      bytes.order(ByteOrder.LITTLE_ENDIAN);
    }
    KEPT.put(file, new Kept(fileKey, size, bytes, System.nanoTime()));
    Iterator<Path> eldest = KEPT.keySet().iterator();
    while (KEPT.size() > MOST) {
      eldest.next();
      eldest.remove();
    }
    if (sweeper == null) {
      sweeper = new Thread(SegmentMaps::sweep, "aeronio segment maps");
      sweeper.setDaemon(true);
      sweeper.start();
    }
    return bytes;
  }

  /** Drops the mappings unused for IDLE until none is kept (all of them if interrupted). */
  private static void sweep() {
    while (true) {
      long idle = IDLE_NS;
      try {
        Thread.sleep(IDLE_NS / 2_000_000);
      } catch (InterruptedException e) {
        idle = 0;
      }
      synchronized (SegmentMaps.class) {
        long now = System.nanoTime(), most = idle;
        KEPT.values().removeIf(k -> now - k.usedNs() >= most);
        if (KEPT.isEmpty()) {
          sweeper = null;
          return;
        }
      }
    }
  }
}
