package serverlab.core;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * HTTP/2 frames written and read by hand over a plain socket (h2c with prior knowledge), for
 * the hardening tests: what a server announces in its SETTINGS, and when it ends a
 * connection with GOAWAY. Frames as RFC 9113 §4.1 lays them out.
 */
public final class H2Wire implements AutoCloseable {
    public static final int SETTINGS = 0x4;
    public static final int GOAWAY = 0x7;
    public static final int SETTINGS_MAX_CONCURRENT_STREAMS = 0x3;
    public static final int ENHANCE_YOUR_CALM = 0xb;
    private static final byte[] PREFACE = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".getBytes(StandardCharsets.US_ASCII);
    /** GET / with :scheme http and :authority "a": static-table indices and one literal. */
    private static final byte[] GET_BLOCK = {(byte) 0x82, (byte) 0x86, (byte) 0x84, 0x41, 0x01, 0x61};

    /** One frame: its type, flags, stream and payload. */
    public record Frame(int type, int flags, int stream, byte[] payload) {
        /** A SETTINGS entry's value, or -1 when the frame does not carry it. */
        public long setting(int id) {
            ByteBuffer entries = ByteBuffer.wrap(payload);
            while (entries.remaining() >= 6) {
                int key = entries.getShort() & 0xffff;
                long value = entries.getInt() & 0xffffffffL;
                if (key == id) {
                    return value;
                }
            }
            return -1;
        }

        /** A GOAWAY's error code. */
        public long errorCode() {
            return ByteBuffer.wrap(payload, 4, 4).getInt() & 0xffffffffL;
        }
    }

    private final Socket socket;
    private final DataInputStream in;
    private final OutputStream out;

    /** Connects, writes the preface and an empty SETTINGS frame. */
    public H2Wire(int port) throws IOException {
        socket = new Socket("127.0.0.1", port);
        socket.setSoTimeout(30_000);
        in = new DataInputStream(socket.getInputStream());
        out = socket.getOutputStream();
        out.write(PREFACE);
        write(SETTINGS, 0, 0, new byte[0]);
    }

    /** The next frame of {@code type} (others read and dropped), or null at the server's close. */
    public Frame next(int type) throws IOException {
        while (true) {
            byte[] header = new byte[9];
            try {
                in.readFully(header);
            } catch (java.io.EOFException closed) {
                return null;
            }
            int length = ((header[0] & 0xff) << 16) | ((header[1] & 0xff) << 8) | (header[2] & 0xff);
            byte[] payload = new byte[length];
            in.readFully(payload);
            int stream = ByteBuffer.wrap(header, 5, 4).getInt() & 0x7fffffff;
            if ((header[3] & 0xff) == type) {
                return new Frame(type, header[4] & 0xff, stream, payload);
            }
        }
    }

    /** A whole GET on {@code stream} and, in the same write, its RST_STREAM(CANCEL). */
    public void getAndReset(int stream) throws IOException {
        write(0x1, 0x5, stream, GET_BLOCK);
        write(0x3, 0, stream, new byte[] {0, 0, 0, 0x8});
    }

    private void write(int type, int flags, int stream, byte[] payload) throws IOException {
        ByteBuffer frame = ByteBuffer.allocate(9 + payload.length);
        frame.put((byte) (payload.length >>> 16)).put((byte) (payload.length >>> 8)).put((byte) payload.length);
        frame.put((byte) type).put((byte) flags).putInt(stream).put(payload);
        out.write(frame.array());
        out.flush();
    }

    /** A port free at the time of asking, for a listener the server under test binds. */
    public static int freePort() throws IOException {
        try (java.net.ServerSocket probe = new java.net.ServerSocket(0)) {
            return probe.getLocalPort();
        }
    }

    @Override
    public void close() throws IOException {
        socket.close();
    }
}
