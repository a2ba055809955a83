package serverlab.core;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.List;

/**
 * The addresses a server listens on (spec §1): 127.0.0.1, and the address its manifest's
 * {@code {host}} names ({@code --host}) when that is another one, as on a lab or cluster host
 * that takes load from other machines.
 */
public final class ListenAddresses {
    public static final String LOOPBACK = "127.0.0.1";

    private ListenAddresses() {
    }

    public static List<String> of(Args args) {
        String host = args.string("host", LOOPBACK);
        try {
            String address = InetAddress.getByName(host).getHostAddress();
            return address.equals(LOOPBACK) ? List.of(LOOPBACK) : List.of(LOOPBACK, address);
        } catch (UnknownHostException e) {
            throw new IllegalArgumentException("--host " + host + ": not an address", e);
        }
    }
}
