package serverlab.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class DocRootTest {
    @TempDir
    Path tmp;
    private Path root;
    private DocRoot docRoot;

    @BeforeEach
    void makeTree() throws IOException {
        root = Files.createDirectories(tmp.resolve("root"));
        Files.createDirectories(root.resolve("sub dir"));
        Files.writeString(root.resolve("sub dir/a+b.txt"), "inside");
        Files.writeString(tmp.resolve("secret.txt"), "outside");
        Files.createSymbolicLink(root.resolve("escape"), tmp.resolve("secret.txt"));
        docRoot = new DocRoot(root);
    }

    private int refusal(String raw) {
        return assertThrows(ApiException.class, () -> docRoot.resolve(raw)).status();
    }

    @Test
    void decodesPercentOnceAndKeepsPlus() throws IOException {
        assertEquals(root.toRealPath().resolve("sub dir/a+b.txt"), docRoot.resolve("sub%20dir/a+b.txt"));
    }

    @Test
    void refusesEveryEscape() {
        assertEquals(403, refusal("../secret.txt"));
        assertEquals(403, refusal("%2e%2e/secret.txt"));
        assertEquals(403, refusal("/etc/passwd"));
        assertEquals(403, refusal("sub%5cdir"));
        assertEquals(403, refusal("a%00b"));
        assertEquals(403, refusal("escape"));
    }

    @Test
    void missingFilesAndDirectoriesAreNotFound() {
        assertEquals(404, refusal("nope.txt"));
        assertEquals(404, refusal("sub%20dir"));
        assertEquals(404, refusal(""));
    }

    @Test
    void badPercentEncodingIsABadRequest() {
        assertEquals(400, refusal("a%zz"));
        assertEquals(400, refusal("a%4"));
    }
}
