package serverlab.tomcatasync;

import serverlab.tomcat.TomcatContract;

class AsyncServerTest extends TomcatContract {
    AsyncServerTest() {
        super("java-tomcat-async", Main.MODEL);
    }
}
