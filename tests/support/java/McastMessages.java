import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteOrder;
import java.security.MessageDigest;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

/**
 * The messages of the one-to-many interop tests (tests/test_java_one_to_many.py makes the same):
 * message `i` of `length` bytes has byte k = (i * 131 + k * 7 + (k >>> 8) * 3) & 0xFF, then its
 * first four bytes (when it has four) replaced by `i` as a little-endian u32. And their digest
 * as the Java programs report it: SHA-256, hex. Plus a reader of stdin.
 */
final class McastMessages
{
    private static final BufferedReader STDIN = new BufferedReader(new InputStreamReader(System.in));

    private McastMessages()
    {
    }

    /** The next line on stdin (one reader for the whole run: none reads ahead and drops lines). */
    static String readLine() throws Exception
    {
        return STDIN.readLine();
    }

    static void write(final int i, final int length, final MutableDirectBuffer buffer, final int offset)
    {
        for (int k = 0; k < length; k++)
        {
            buffer.putByte(offset + k, (byte)(i * 131 + k * 7 + (k >>> 8) * 3));
        }
        if (length >= 4)
        {
            buffer.putInt(offset, i, ByteOrder.LITTLE_ENDIAN);
        }
    }

    static String sha256(final DirectBuffer buffer, final int offset, final int length) throws Exception
    {
        final byte[] bytes = new byte[length];
        buffer.getBytes(offset, bytes);
        final byte[] digest = MessageDigest.getInstance("SHA-256").digest(bytes);
        final StringBuilder hex = new StringBuilder(64);
        for (final byte b : digest)
        {
            hex.append(Character.forDigit((b >> 4) & 0xF, 16)).append(Character.forDigit(b & 0xF, 16));
        }
        return hex.toString();
    }
}
