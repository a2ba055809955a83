package serverlab.core;

import java.nio.ByteBuffer;

/**
 * Counts syslog messages on one TCP connection (spec §7, RFC 6587): a frame starting with a
 * digit 1-9 is octet-counted, anything else ends at a newline. Messages are counted, never
 * parsed or kept, and a message may arrive split across any number of reads.
 */
public final class SyslogFramer {
    /** Nine digits is under 1 GB; a longer "length" is a newline-framed message that starts with digits. */
    private static final int MAX_LENGTH_DIGITS = 9;

    private enum State { FRAME_START, LENGTH, OCTETS, LINE }

    private final Stats stats;
    private State state = State.FRAME_START;
    private int digits;
    private int messageLength;
    private int pending;

    public SyslogFramer(Stats stats) {
        this.stats = stats;
    }

    public void feed(ByteBuffer buf) {
        while (buf.hasRemaining()) {
            switch (state) {
                case FRAME_START:
                    startFrame(buf.get(buf.position()));
                    break;
                case LENGTH:
                    readLength(buf.get());
                    break;
                case OCTETS:
                    skipOctets(buf);
                    break;
                default:
                    scanLine(buf);
                    break;
            }
        }
    }

    private void startFrame(byte first) {
        digits = 0;
        messageLength = 0;
        state = first >= '1' && first <= '9' ? State.LENGTH : State.LINE;
    }

    private void readLength(byte b) {
        if (b == ' ') {
            pending = messageLength;
            state = State.OCTETS;
        } else if (b >= '0' && b <= '9' && digits < MAX_LENGTH_DIGITS) {
            messageLength = messageLength * 10 + (b - '0');
            digits++;
        } else {
            // Not octet counting after all: the digits read so far open a newline-framed message.
            messageLength = digits;
            state = State.LINE;
            if (b == '\n') {
                endLine();
            } else {
                messageLength++;
            }
        }
    }

    private void skipOctets(ByteBuffer buf) {
        int n = Math.min(pending, buf.remaining());
        buf.position(buf.position() + n);
        pending -= n;
        if (pending == 0) {
            stats.syslogMessage(messageLength);
            state = State.FRAME_START;
        }
    }

    private void scanLine(ByteBuffer buf) {
        int start = buf.position();
        int limit = buf.limit();
        for (int i = start; i < limit; i++) {
            if (buf.get(i) == '\n') {
                messageLength += i - start;
                buf.position(i + 1);
                endLine();
                return;
            }
        }
        messageLength += limit - start;
        buf.position(limit);
    }

    private void endLine() {
        if (messageLength > 0) {
            stats.syslogMessage(messageLength);
        }
        state = State.FRAME_START;
    }

    /** One UDP datagram is one message; a trailing newline is not part of it. */
    public static void countDatagram(Stats stats, ByteBuffer datagram) {
        int length = datagram.remaining();
        if (length > 0 && datagram.get(datagram.limit() - 1) == '\n') {
            length--;
        }
        if (length > 0) {
            stats.syslogMessage(length);
        }
    }
}
