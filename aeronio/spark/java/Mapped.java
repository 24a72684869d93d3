package io.aeronio.spark;

import java.lang.reflect.Field;
import java.nio.Buffer;
import java.nio.ByteOrder;
import java.nio.ByteBuffer;
import sun.misc.Unsafe;

/**
 * Little-endian reads of a mapped segment file by address, and of byte arrays, without a
 * buffer's per-call index and scope checks: the reader checks its bounds itself (PartReader
 * against the mapping's limit, Columns within its batch). A fault in a mapping cut under the
 * read is the JVM's InternalError, as with the buffer's own getters.
 */
final class Mapped {
  private static final Unsafe UNSAFE;
  private static final long ADDRESS; // the field java.nio.Buffer.address
  static final long BYTES = Unsafe.ARRAY_BYTE_BASE_OFFSET;
  private static final boolean SWAP = ByteOrder.nativeOrder() != ByteOrder.LITTLE_ENDIAN;

  static {
    try {
      Field field = Unsafe.class.getDeclaredField("theUnsafe");
      field.setAccessible(true);
      UNSAFE = (Unsafe) field.get(null);
      ADDRESS = UNSAFE.objectFieldOffset(Buffer.class.getDeclaredField("address"));
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  private Mapped() {}

  /**
   * The address of a direct buffer's first byte (a mapping's, or one allocated): the buffer must
   * stay reachable while it is read.
   */
  static long address(ByteBuffer direct) {
    return UNSAFE.getLong(direct, ADDRESS);
  }

  /** The little-endian int at `offset` of `base` (null: `offset` is an address). */
  static int getInt(Object base, long offset) {
    int value = UNSAFE.getInt(base, offset);
    return SWAP ? Integer.reverseBytes(value) : value;
  }

  static long getLong(Object base, long offset) {
    long value = UNSAFE.getLong(base, offset);
    return SWAP ? Long.reverseBytes(value) : value;
  }

  static short getShort(Object base, long offset) {
    short value = UNSAFE.getShort(base, offset);
    return SWAP ? Short.reverseBytes(value) : value;
  }

  static byte getByte(Object base, long offset) {
    return UNSAFE.getByte(base, offset);
  }

  /** Copies `length` bytes from the address `from` to the address `to`. */
  static void copy(long from, long to, int length) {
    UNSAFE.copyMemory(from, to, length);
  }

  /** Copies `length` bytes from `address` to `to` at `at` (eight at a time: records are small). */
  static void copy(long address, byte[] to, int at, int length) {
    long into = BYTES + at;
    int i = 0;
    for (; i + 8 <= length; i += 8) {
      UNSAFE.putLong(to, into + i, UNSAFE.getLong(address + i));
    }
    for (; i < length; i++) {
      UNSAFE.putByte(to, into + i, UNSAFE.getByte(address + i));
    }
  }
}
