import java.util.concurrent.TimeUnit;

import io.aeron.Aeron;
import io.aeron.Publication;
import io.aeron.driver.MediaDriver;
import org.agrona.BufferUtil;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * McastPublisher CHANNEL STREAM COUNT SIZES [DESTINATION ...]: an embedded media driver
 * (-Daeron.dir, other -D properties as the driver reads them), a publication on CHANNEL with each
 * DESTINATION added (multi-destination-cast, control-mode=manual), `publication` with its session,
 * `connected` once a receiver is there; then, after a line on stdin, messages 0..COUNT-1 of
 * McastMessages, message i SIZES[i % n] bytes long (SIZES: comma-separated), and `published`
 * with the position; after the next line the publication closes (`closed`: its driver lingers it
 * with END OF STREAM); after the next, `counters` with the driver's system counters, and exit.
 * For tests/test_java_one_to_many.py.
 */
public final class McastPublisher
{
    public static void main(final String[] args) throws Exception
    {
        final String channel = args[0];
        final int streamId = Integer.parseInt(args[1]);
        final int count = Integer.parseInt(args[2]);
        final String[] sizeTexts = args[3].split(",");
        final int[] sizes = new int[sizeTexts.length];
        int maxSize = 0;
        for (int i = 0; i < sizes.length; i++)
        {
            sizes[i] = Integer.parseInt(sizeTexts[i]);
            maxSize = Math.max(maxSize, sizes[i]);
        }
        final UnsafeBuffer buffer = new UnsafeBuffer(BufferUtil.allocateDirectAligned(maxSize + 64, 64));
        final IdleStrategy idle = new BackoffIdleStrategy(100, 10, 1000, 100_000);
        final long offerTimeoutNs = TimeUnit.SECONDS.toNanos(30);

        try (MediaDriver driver = SequenceMessages.launchDriver();
            Aeron aeron = SequenceMessages.connect(driver))
        {
            final Publication publication = aeron.addPublication(channel, streamId);
            for (int d = 4; d < args.length; d++)
            {
                publication.addDestination(args[d]);
            }
            SequenceMessages.say("publication", "{\"session\": " + publication.sessionId() + "}");
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
            SequenceMessages.say("connected", "{}");

            McastMessages.readLine();
            for (int i = 0; i < count; i++)
            {
                final int length = sizes[i % sizes.length];
                McastMessages.write(i, length, buffer, 0);
                SequenceMessages.offer(publication, buffer, length, idle, offerTimeoutNs, i);
            }
            SequenceMessages.say("published", "{\"position\": " + publication.position() + "}");

            McastMessages.readLine();
            publication.close();
            SequenceMessages.say("closed", "{}");

            McastMessages.readLine();
            SequenceMessages.say("counters", SequenceMessages.systemCounters(aeron));
        }
    }
}
