import java.util.concurrent.TimeUnit;

import io.aeron.Aeron;
import io.aeron.Publication;
import io.aeron.driver.MediaDriver;
import org.agrona.BufferUtil;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * SequencePublisher CHANNEL STREAM COUNT: an embedded media driver (-Daeron.dir), a publication,
 * `connected` once a subscriber is there, then the messages 0..COUNT-1 of SequenceMessages,
 * `published` with the time it took, and, after a line (or the end) on stdin, `counters` with the
 * driver's system counters before closing.
 */
public final class SequencePublisher
{
    public static void main(final String[] args) throws Exception
    {
        final String channel = args[0];
        final int streamId = Integer.parseInt(args[1]);
        final long count = Long.parseLong(args[2]);
        final long offerTimeoutNs = TimeUnit.SECONDS.toNanos(60);
        final UnsafeBuffer buffer = new UnsafeBuffer(BufferUtil.allocateDirectAligned(256, 64));
        final IdleStrategy idle = new BackoffIdleStrategy(100, 10, 1000, 100_000);

        try (MediaDriver driver = SequenceMessages.launchDriver();
            Aeron aeron = SequenceMessages.connect(driver);
            Publication publication = aeron.addPublication(channel, streamId))
        {
            final long connectDeadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (!publication.isConnected())
            {
                if (System.nanoTime() > connectDeadline)
                {
                    SequenceMessages.say("error", SequenceMessages.quote("not connected within 30 s"));
                    System.exit(2);
                }
                Thread.sleep(1);
            }
            SequenceMessages.say("connected", "{\"session_id\": " + publication.sessionId() + "}");

            final long start = System.nanoTime();
            for (long seq = 0; seq < count; seq++)
            {
                final int length = SequenceMessages.write(seq, buffer, 0);
                SequenceMessages.offer(publication, buffer, length, idle, offerTimeoutNs, seq);
            }
            final double seconds = (System.nanoTime() - start) / 1e9;
            SequenceMessages.say(
                "published",
                "{\"count\": " + count + ", \"position\": " + publication.position() + ", \"seconds\": " + seconds + "}");

            SequenceMessages.readLine();
            SequenceMessages.say("counters", SequenceMessages.systemCounters(aeron));
        }
    }
}
