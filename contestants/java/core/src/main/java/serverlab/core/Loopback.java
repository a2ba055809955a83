package serverlab.core;

import java.util.function.Supplier;

/** The control endpoints' client check (spec §5). */
public final class Loopback {
    private Loopback() {
    }

    public static boolean isLoopback(String address) {
        return address != null
                && (address.startsWith("127.") || address.equals("::1") || address.equals("0:0:0:0:0:0:0:1")
                        || address.startsWith("::ffff:127."));
    }

    /** The client address is asked for only when the endpoint needs it: formatting it costs. */
    public static void check(Endpoint endpoint, Supplier<String> clientAddress) {
        if (endpoint.loopbackOnly() && !isLoopback(clientAddress.get())) {
            throw new ApiException(403, "control endpoints answer loopback clients only");
        }
    }
}
