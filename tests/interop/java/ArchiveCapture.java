// Drives the reference AeronArchive client against an archive (the reference's own, launched
// here, or any archive already listening on the default control channel) and prints, in order,
// every control request (spied on the client's control publication), every control response and
// every recording event as one hex line each, then what each call returned.
//
//   ArchiveCapture <aeron dir> <archive dir or "-" for an archive already running> [messages]
//
// It publishes `messages` (default 3) messages of 100 bytes (the message's index as a
// little-endian int, then zeros); the output with the default is the same as without the argument.
import io.aeron.*;
import io.aeron.archive.*;
import io.aeron.archive.client.*;
import io.aeron.archive.codecs.SourceLocation;
import io.aeron.driver.*;
import org.agrona.*;
import org.agrona.concurrent.UnsafeBuffer;
import java.io.File;
import java.util.*;

public class ArchiveCapture {
    static final List<String> lines = new ArrayList<>();
    static Subscription requests, responses, events;

    static void drain() {
        for (int i = 0; i < 50; i++) {
            requests.poll((b, o, l, h) -> lines.add("request " + hex(b, o, l)), 100);
            responses.poll((b, o, l, h) -> lines.add("response " + hex(b, o, l)), 100);
            events.poll((b, o, l, h) -> lines.add("event " + hex(b, o, l)), 100);
            try { Thread.sleep(2); } catch (InterruptedException e) { }
        }
    }

    static String hex(DirectBuffer b, int o, int l) {
        StringBuilder s = new StringBuilder();
        for (int i = 0; i < l; i++) s.append(String.format("%02x", b.getByte(o + i)));
        return s.toString();
    }

    static void say(String s) { drain(); lines.add("call " + s); }

    public static void main(String[] args) throws Exception {
        String aeronDir = args[0];
        int messages = args.length > 2 ? Integer.parseInt(args[2]) : 3;
        ArchivingMediaDriver archiving = null;
        MediaDriver driver = null;
        MediaDriver.Context dctx = new MediaDriver.Context().aeronDirectoryName(aeronDir)
            .dirDeleteOnStart(true).threadingMode(ThreadingMode.SHARED);
        if (!args[1].equals("-")) {
            archiving = ArchivingMediaDriver.launch(dctx, new Archive.Context().aeronDirectoryName(aeronDir)
                .archiveDir(new File(args[1])).deleteArchiveOnStart(true)
                .threadingMode(ArchiveThreadingMode.SHARED));
        } else {
            driver = MediaDriver.launch(dctx);
        }
        Aeron aeron = Aeron.connect(new Aeron.Context().aeronDirectoryName(aeronDir));
        requests = aeron.addSubscription("aeron-spy:aeron:udp?endpoint=localhost:8010", 10);
        responses = aeron.addSubscription("aeron:udp?endpoint=localhost:8020", 20);
        events = aeron.addSubscription("aeron:udp?endpoint=localhost:8030", 30);
        AeronArchive archive = AeronArchive.connect(new AeronArchive.Context().aeron(aeron));
        say("connect " + archive.controlSessionId());

        String channel = "aeron:udp?endpoint=localhost:14123";
        long subscriptionId = archive.startRecording(channel, 1001, SourceLocation.REMOTE);
        say("startRecording " + subscriptionId);
        Publication publication = aeron.addExclusivePublication(channel + "|term-length=64k", 1001);
        while (!publication.isConnected()) Thread.sleep(1);
        UnsafeBuffer message = new UnsafeBuffer(new byte[100]);
        for (int i = 0; i < messages; i++) {
            message.putInt(0, i);
            while (publication.offer(message) < 0) Thread.sleep(1);
        }
        long end = publication.position();
        // The recording is in the catalog once the archive says it started (RecordingStarted).
        while (events.poll((b, o, l, h) -> lines.add("event " + hex(b, o, l)), 100) == 0) Thread.sleep(1);
        long recordingId = archive.findLastMatchingRecording(0, "endpoint=localhost:14123", 1001, publication.sessionId());
        say("findLastMatchingRecording " + recordingId);
        while (archive.getRecordingPosition(recordingId) < end) Thread.sleep(1);
        say("getRecordingPosition " + archive.getRecordingPosition(recordingId));
        final List<String> found = new ArrayList<>();
        RecordingDescriptorConsumer consumer = (controlSessionId, correlationId, rid, startTimestamp, stopTimestamp,
            startPosition, stopPosition, initialTermId, segmentFileLength, termBufferLength, mtuLength, sessionId,
            streamId, strippedChannel, originalChannel, sourceIdentity) ->
            found.add(rid + " " + startPosition + " " + stopPosition + " " + strippedChannel + " " + originalChannel);
        say("listRecordings " + archive.listRecordings(0, 10, consumer) + " " + found);
        found.clear();
        say("listRecordingsForUri " + archive.listRecordingsForUri(0, 10, "localhost:14123", 1001, consumer) + " " + found);
        found.clear();
        say("listRecording " + archive.listRecording(recordingId, consumer) + " " + found);
        found.clear();
        say("listRecording(999) " + archive.listRecording(999, consumer));
        Subscription replay = archive.replay(recordingId, 0, end, "aeron:udp?endpoint=localhost:14124", 1002);
        int[] count = {0};
        while (count[0] < messages) replay.poll((b, o, l, h) -> { count[0]++; }, 10);
        say("replay " + count[0]);
        replay.close();
        archive.stopRecording(channel, 1001);
        say("stopRecording");
        say("getStopPosition " + archive.getStopPosition(recordingId));
        try { archive.stopRecording(channel, 1001); } catch (ArchiveException e) { say("stopRecording again: " + e.getMessage()); }
        try { archive.getStopPosition(999); } catch (ArchiveException e) { say("getStopPosition(999): " + e.getMessage()); }
        long replaySessionId = archive.startReplay(recordingId, 0, end, "aeron:udp?endpoint=localhost:14125", 1003);
        say("startReplay " + replaySessionId);
        archive.stopReplay(replaySessionId);
        say("stopReplay");
        long extendId = archive.extendRecording(recordingId, channel, 1001, SourceLocation.REMOTE);
        say("extendRecording " + extendId);
        archive.stopRecording(extendId);
        say("stopRecording(subscriptionId)");
        archive.truncateRecording(recordingId, end - 128 - 32);
        say("truncateRecording " + archive.getStopPosition(recordingId));
        archive.close();
        say("close");
        drain();
        for (String line : lines) System.out.println(line);
        aeron.close();
        if (archiving != null) archiving.close();
        if (driver != null) driver.close();
    }
}
