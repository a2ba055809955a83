package serverlab.core;

import java.util.List;
import java.util.stream.Stream;

/**
 * Spec §12's cipher suites, in the JDK's names: AEAD only, so that every Java contestant's TLS
 * port offers the same set whatever its library's default (Tomcat's also allows CBC).
 */
public final class AeadSuites {
    /** TLS 1.3's suites, all AEAD; named anyway so the set does not follow a library's default. */
    public static final List<String> TLS13 = List.of(
            "TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256");
    /** TLS 1.2's ECDHE suites with AEAD. */
    public static final List<String> TLS12 = List.of(
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
            "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256");
    /** Both, TLS 1.3's first: for a library that takes one list. */
    public static final List<String> ALL =
            Stream.concat(TLS13.stream(), TLS12.stream()).toList();

    private AeadSuites() {
    }
}
