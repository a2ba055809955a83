package serverlab.core;

import java.nio.ByteBuffer;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.Map;

/** Hashes an upload as it streams in, for the {@code POST /upload} answer (spec §4). */
public final class UploadDigest {
    /** Bodies announced larger than 1 GiB may be refused up front; we accept twice that. */
    public static final long MAX_DECLARED = 2L << 30;
    private final MessageDigest sha256;
    private long bytes;

    public UploadDigest() {
        try {
            sha256 = MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every JRE has SHA-256", e);
        }
    }

    public static void checkDeclaredLength(long contentLength) {
        if (contentLength > MAX_DECLARED) {
            throw new ApiException(413, "upload too large");
        }
    }

    public void update(byte[] buf, int offset, int len) {
        sha256.update(buf, offset, len);
        bytes += len;
    }

    public void update(ByteBuffer buf) {
        bytes += buf.remaining();
        sha256.update(buf);
    }

    public byte[] answer() {
        return Json.bytes(Map.of("bytes", bytes, "sha256", HexFormat.of().formatHex(sha256.digest())));
    }
}
