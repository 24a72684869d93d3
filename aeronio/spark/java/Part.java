package io.aeronio.spark;

import org.apache.spark.sql.connector.read.InputPartition;

/** One partition: the messages of a recording that start in [emitFrom, emitTo). */
record Part(
    String file, // the segment file
    long filePosition, // the stream position of its first byte
    long recordingId,
    int sessionId,
    int streamId,
    String channel,
    int termLength,
    int initialTermId,
    long scanFrom, // a frame boundary at or before emitFrom
    long emitFrom,
    long emitTo,
    long readLimit) // whole frames are recorded up to here
    implements InputPartition {}
