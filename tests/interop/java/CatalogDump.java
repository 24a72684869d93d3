// Prints what the reference 1.15.1 archive's own Catalog class reads from an archive directory:
// one `descriptor` line per catalog entry, every field of its descriptor header and descriptor as
// name=value, tab-separated, in the schema's order; then `count <countEntries()>`.
//
//   io.aeron.archive.CatalogDump <archive dir>
//
// In package io.aeron.archive because Catalog is package-private there; the constructor is the
// one CatalogTool opens a directory with (Catalog(File, EpochClock)).
package io.aeron.archive;

import org.agrona.concurrent.SystemEpochClock;

import java.io.File;

public class CatalogDump {
    public static void main(String[] args) {
        try (Catalog catalog = new Catalog(new File(args[0]), new SystemEpochClock())) {
            catalog.forEach((headerEncoder, header, encoder, d) -> System.out.println(
                "descriptor" +
                "\tlength=" + header.length() +
                "\tvalid=" + header.valid() +
                "\tcontrolSessionId=" + d.controlSessionId() +
                "\tcorrelationId=" + d.correlationId() +
                "\trecordingId=" + d.recordingId() +
                "\tstartTimestamp=" + d.startTimestamp() +
                "\tstopTimestamp=" + d.stopTimestamp() +
                "\tstartPosition=" + d.startPosition() +
                "\tstopPosition=" + d.stopPosition() +
                "\tinitialTermId=" + d.initialTermId() +
                "\tsegmentFileLength=" + d.segmentFileLength() +
                "\ttermBufferLength=" + d.termBufferLength() +
                "\tmtuLength=" + d.mtuLength() +
                "\tsessionId=" + d.sessionId() +
                "\tstreamId=" + d.streamId() +
                "\tstrippedChannel=" + d.strippedChannel() +
                "\toriginalChannel=" + d.originalChannel() +
                "\tsourceIdentity=" + d.sourceIdentity()));
            System.out.println("count " + catalog.countEntries());
        }
    }
}
