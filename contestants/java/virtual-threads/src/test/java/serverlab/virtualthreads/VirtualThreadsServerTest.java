package serverlab.virtualthreads;

import serverlab.tomcat.TomcatContract;

class VirtualThreadsServerTest extends TomcatContract {
    VirtualThreadsServerTest() {
        super("java-virtual-threads", Main.MODEL);
    }
}
