import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteOrder;
import java.util.Map;
import java.util.TreeMap;

import io.aeron.Aeron;
import io.aeron.Publication;
import io.aeron.driver.MediaDriver;
import io.aeron.driver.ThreadingMode;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.status.CountersReader;

/**
 * The deterministic messages of the loss tests, the same as tests/netns_worker.py makes: message
 * `seq` is `seq` as a little-endian u64 followed by `length(seq) - 8` bytes of a fixed
 * pseudo-random block, from an offset derived from `seq`; lengths 16..200. Plus what both Java
 * programs share: an embedded media driver on -Daeron.dir, the system counters as JSON, stdin.
 */
final class SequenceMessages
{
    static final int MIN_LENGTH = 16;
    static final int MAX_LENGTH = 200;
    static final int BLOCK_LENGTH = 65536;
    static final long SALT = 0x6A09E667F3BCC908L;
    static final byte[] BLOCK = new byte[BLOCK_LENGTH];

    static
    {
        for (int i = 0; i < BLOCK_LENGTH; i++)
        {
            BLOCK[i] = (byte)mix(i);
        }
    }

    private SequenceMessages()
    {
    }

    /**
     * Offer `length` bytes of `buffer`, idling through back-pressure; on CLOSED, MAX_POSITION_EXCEEDED
     * or no success within `timeoutNs`, say an error naming message `number` and exit 2.
     */
    static void offer(
        final Publication publication,
        final DirectBuffer buffer,
        final int length,
        final IdleStrategy idle,
        final long timeoutNs,
        final long number)
    {
        final long deadline = System.nanoTime() + timeoutNs;
        idle.reset();
        long result;
        while ((result = publication.offer(buffer, 0, length)) < 0)
        {
            if (result == Publication.CLOSED || result == Publication.MAX_POSITION_EXCEEDED ||
                System.nanoTime() > deadline)
            {
                say("error", quote(
                    "offer of message " + number + " failed: " + result + " at position " + publication.position()));
                System.exit(2);
            }
            idle.idle();
        }
    }

    /** splitmix64's finaliser. */
    static long mix(final long x)
    {
        long z = x + 0x9E3779B97F4A7C15L;
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }

    static int length(final long seq)
    {
        return MIN_LENGTH + (int)((mix(seq ^ SALT) & 0xFFFF) % (MAX_LENGTH - MIN_LENGTH + 1));
    }

    static int blockOffset(final long seq)
    {
        return (int)((mix(seq ^ SALT) >>> 32) % (BLOCK_LENGTH - MAX_LENGTH));
    }

    /** Writes message `seq` at `offset`; returns its length. */
    static int write(final long seq, final MutableDirectBuffer buffer, final int offset)
    {
        final int length = length(seq);
        buffer.putLong(offset, seq, ByteOrder.LITTLE_ENDIAN);
        buffer.putBytes(offset + 8, BLOCK, blockOffset(seq), length - 8);
        return length;
    }

    /** Null when the message is message `seq` byte for byte, else what differs. */
    static String check(final long seq, final DirectBuffer buffer, final int offset, final int length)
    {
        final int expected = length(seq);
        if (length != expected)
        {
            return "seq " + seq + ": length " + length + ", expected " + expected;
        }
        final int start = blockOffset(seq);
        for (int i = 8; i < length; i++)
        {
            if (buffer.getByte(offset + i) != BLOCK[start + i - 8])
            {
                return "seq " + seq + ": byte " + i + " differs";
            }
        }
        return null;
    }

    static MediaDriver launchDriver()
    {
        final MediaDriver.Context ctx = new MediaDriver.Context()
            .threadingMode(ThreadingMode.SHARED)
            .termBufferSparseFile(true)
            .dirDeleteOnStart(true);
        return MediaDriver.launch(ctx);
    }

    static Aeron connect(final MediaDriver driver)
    {
        return Aeron.connect(new Aeron.Context().aeronDirectoryName(driver.aeronDirectoryName()));
    }

    /** The driver's system counters (type 0) as a JSON object of label to value. */
    static String systemCounters(final Aeron aeron)
    {
        final CountersReader reader = aeron.countersReader();
        final Map<String, Long> values = new TreeMap<>();
        reader.forEach(
            (counterId, typeId, keyBuffer, label) ->
            {
                if (typeId == 0)
                {
                    values.put(label, reader.getCounterValue(counterId));
                }
            });
        final StringBuilder json = new StringBuilder("{");
        for (final Map.Entry<String, Long> entry : values.entrySet())
        {
            if (json.length() > 1)
            {
                json.append(", ");
            }
            json.append(quote(entry.getKey())).append(": ").append(entry.getValue());
        }
        return json.append('}').toString();
    }

    static String quote(final String text)
    {
        return '"' + text.replace("\\", "\\\\").replace("\"", "\\\"") + '"';
    }

    static void say(final String tag, final String json)
    {
        System.out.println(tag + " " + json);
        System.out.flush();
    }

    static String readLine() throws Exception
    {
        return new BufferedReader(new InputStreamReader(System.in)).readLine();
    }
}
