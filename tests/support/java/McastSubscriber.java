import java.util.concurrent.TimeUnit;

import io.aeron.Aeron;
import io.aeron.FragmentAssembler;
import io.aeron.Image;
import io.aeron.Subscription;
import io.aeron.driver.MediaDriver;
import io.aeron.logbuffer.FragmentHandler;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.IdleStrategy;

/**
 * McastSubscriber CHANNEL STREAM TIMEOUT_S: an embedded media driver (-Daeron.dir, other -D
 * properties as the driver reads them), a subscription, `ready`, then one line per event:
 * `image` / `unavailable` for images coming and going (session, source or position), `msg` for
 * every message reassembled (session, length, the position after it, its SHA-256), until a line
 * (or the end) on stdin or TIMEOUT_S; then `result` with the number of messages and the driver's
 * system counters, and exit. For tests/test_java_one_to_many.py.
 */
public final class McastSubscriber
{
    static volatile boolean stop;
    static long received;

    public static void main(final String[] args) throws Exception
    {
        final String channel = args[0];
        final int streamId = Integer.parseInt(args[1]);
        final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(Long.parseLong(args[2]));
        final IdleStrategy idle = new BackoffIdleStrategy(100, 10, 1000, 100_000);
        final Thread stdin = new Thread(
            () ->
            {
                try
                {
                    McastMessages.readLine();
                }
                catch (final Exception ignore)
                {
                }
                stop = true;
            });
        stdin.setDaemon(true);
        stdin.start();

        final FragmentHandler handler = new FragmentAssembler(
            (buffer, offset, length, header) ->
            {
                received++;
                final String digest;
                try
                {
                    digest = McastMessages.sha256(buffer, offset, length);
                }
                catch (final Exception e)
                {
                    throw new RuntimeException(e);
                }
                SequenceMessages.say(
                    "msg",
                    "{\"session\": " + header.sessionId() + ", \"length\": " + length +
                    ", \"position\": " + header.position() + ", \"sha256\": \"" + digest + "\"}");
            });

        try (MediaDriver driver = SequenceMessages.launchDriver();
            Aeron aeron = SequenceMessages.connect(driver);
            Subscription subscription = aeron.addSubscription(
                channel, streamId, McastSubscriber::onAvailable, McastSubscriber::onUnavailable))
        {
            SequenceMessages.say("ready", "{}");
            while (!stop && System.nanoTime() < deadline)
            {
                idle.idle(subscription.poll(handler, 256));
            }
            SequenceMessages.say(
                "result",
                "{\"messages\": " + received + ", \"timed_out\": " + !stop +
                ", \"counters\": " + SequenceMessages.systemCounters(aeron) + "}");
        }
    }

    static void onAvailable(final Image image)
    {
        SequenceMessages.say(
            "image",
            "{\"session\": " + image.sessionId() + ", \"source\": " +
            SequenceMessages.quote(image.sourceIdentity()) + "}");
    }

    static void onUnavailable(final Image image)
    {
        SequenceMessages.say(
            "unavailable",
            "{\"session\": " + image.sessionId() + ", \"position\": " + image.position() +
            ", \"end_of_stream\": " + image.isEndOfStream() + "}");
    }
}
