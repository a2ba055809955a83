package serverlab.tomcatblocking;

import serverlab.tomcat.TomcatContract;

class BlockingServerTest extends TomcatContract {
    BlockingServerTest() {
        super("java-tomcat-blocking", Main.MODEL);
    }
}
