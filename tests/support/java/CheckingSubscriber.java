import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;

import io.aeron.Aeron;
import io.aeron.FragmentAssembler;
import io.aeron.Subscription;
import io.aeron.driver.MediaDriver;
import io.aeron.logbuffer.FragmentHandler;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.IdleStrategy;

/**
 * CheckingSubscriber CHANNEL STREAM COUNT TIMEOUT_S: an embedded media driver (-Daeron.dir), a
 * subscription, `ready`, then every message checked against SequenceMessages: sequence numbers
 * 0..COUNT-1 exactly once and in order, each byte-identical; `progress` lines every second and
 * one `result` line (counts, the first errors, timing, the driver's system counters) once all
 * arrived (and half a second more showed nothing extra) or TIMEOUT_S passed.
 */
public final class CheckingSubscriber
{
    static long received;
    static long nextSeq;
    static long firstNs;
    static long lastNs;
    static long errorCount;
    static final List<String> ERRORS = new ArrayList<>();
    static final TreeSet<Integer> SESSIONS = new TreeSet<>();

    static void error(final String text)
    {
        errorCount++;
        if (ERRORS.size() < 20)
        {
            ERRORS.add(text);
        }
    }

    public static void main(final String[] args) throws Exception
    {
        final String channel = args[0];
        final int streamId = Integer.parseInt(args[1]);
        final long count = Long.parseLong(args[2]);
        final long timeoutNs = TimeUnit.SECONDS.toNanos(Long.parseLong(args[3]));
        final IdleStrategy idle = new BackoffIdleStrategy(100, 10, 1000, 100_000);

        final FragmentHandler handler = new FragmentAssembler(
            (buffer, offset, length, header) ->
            {
                final long now = System.nanoTime();
                if (received++ == 0)
                {
                    firstNs = now;
                }
                lastNs = now;
                SESSIONS.add(header.sessionId());
                if (length < 8)
                {
                    error("message " + received + ": only " + length + " bytes");
                    return;
                }
                final long seq = buffer.getLong(offset, ByteOrder.LITTLE_ENDIAN);
                if (seq != nextSeq)
                {
                    error("message " + received + ": seq " + seq + ", expected " + nextSeq);
                }
                final String problem = SequenceMessages.check(seq, buffer, offset, length);
                if (problem != null)
                {
                    error("message " + received + ": " + problem);
                }
                nextSeq = seq + 1;
            });

        try (MediaDriver driver = SequenceMessages.launchDriver();
            Aeron aeron = SequenceMessages.connect(driver);
            Subscription subscription = aeron.addSubscription(channel, streamId))
        {
            SequenceMessages.say("ready", "{}");
            final long start = System.nanoTime();
            final long deadline = start + timeoutNs;
            long nextProgress = start + TimeUnit.SECONDS.toNanos(1);
            boolean timedOut = false;
            while (received < count || nextSeq != count)
            {
                final int fragments = subscription.poll(handler, 1024);
                idle.idle(fragments);
                final long now = System.nanoTime();
                if (now >= nextProgress)
                {
                    nextProgress = now + TimeUnit.SECONDS.toNanos(1);
                    SequenceMessages.say("progress", "{\"received\": " + received + "}");
                }
                if (now > deadline)
                {
                    timedOut = true;
                    error("timed out after " + args[3] + " s with " + received + " of " + count + " messages");
                    break;
                }
            }
            if (!timedOut)
            {
                final long extraDeadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(500);
                final long before = received;
                while (System.nanoTime() < extraDeadline)
                {
                    idle.idle(subscription.poll(handler, 1024));
                }
                if (received != before)
                {
                    error((received - before) + " extra messages after the last one");
                }
            }

            final StringBuilder errors = new StringBuilder("[");
            for (final String e : ERRORS)
            {
                errors.append(errors.length() > 1 ? ", " : "").append(SequenceMessages.quote(e));
            }
            errors.append(']');
            SequenceMessages.say(
                "result",
                "{\"received\": " + received +
                ", \"next_seq\": " + nextSeq +
                ", \"error_count\": " + errorCount +
                ", \"errors\": " + errors +
                ", \"sessions\": " + SESSIONS +
                ", \"seconds\": " + (lastNs - firstNs) / 1e9 +
                ", \"counters\": " + SequenceMessages.systemCounters(aeron) + "}");
        }
    }
}
