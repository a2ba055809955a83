package serverlab.core;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;

/** Resolves {@code /files/<path>} below the document root, refusing every escape (spec §3). */
public final class DocRoot {
    public static final String CONTENT_TYPE = "application/octet-stream";
    private final Path root;

    public DocRoot(Path directory) throws IOException {
        this.root = directory.toRealPath();
    }

    /**
     * The regular file named by the raw (still percent-encoded) path after {@code /files/}.
     * Throws 403 for a traversal, 404 for a missing file or a directory, 400 for bad encoding.
     */
    public Path resolve(String rawRelative) {
        String relative = percentDecode(rawRelative);
        if (relative.indexOf('\0') >= 0 || relative.indexOf('\\') >= 0 || relative.startsWith("/")
                || hasDotDotSegment(relative)) {
            throw forbidden();
        }
        Path real;
        try {
            real = root.resolve(relative).toRealPath();
        } catch (InvalidPathException e) {
            throw ApiException.badRequest("invalid path");
        } catch (IOException e) {
            throw ApiException.notFound("file not found");
        }
        if (!real.startsWith(root)) {
            throw forbidden(); // a symbolic link that leads out of the root
        }
        if (!Files.isRegularFile(real)) {
            throw ApiException.notFound("file not found");
        }
        return real;
    }

    private static ApiException forbidden() {
        return new ApiException(403, "path outside the document root");
    }

    private static boolean hasDotDotSegment(String path) {
        for (String segment : path.split("/", -1)) {
            if (segment.equals("..")) {
                return true;
            }
        }
        return false;
    }

    /** Decodes %XX once; unlike URLDecoder it leaves '+' alone, as a path must. */
    static String percentDecode(String raw) {
        if (raw.indexOf('%') < 0) {
            return raw;
        }
        ByteArrayOutputStream out = new ByteArrayOutputStream(raw.length());
        byte[] bytes = raw.getBytes(StandardCharsets.UTF_8);
        for (int i = 0; i < bytes.length; i++) {
            if (bytes[i] != '%') {
                out.write(bytes[i]);
                continue;
            }
            int hi = i + 2 < bytes.length ? Character.digit(bytes[i + 1], 16) : -1;
            int lo = hi >= 0 ? Character.digit(bytes[i + 2], 16) : -1;
            if (lo < 0) {
                throw ApiException.badRequest("bad percent encoding");
            }
            out.write(hi * 16 + lo);
            i += 2;
        }
        return out.toString(StandardCharsets.UTF_8);
    }
}
