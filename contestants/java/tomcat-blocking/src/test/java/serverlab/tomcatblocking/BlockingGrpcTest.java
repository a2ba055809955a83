package serverlab.tomcatblocking;

import serverlab.tomcat.GrpcContract;

/** gRPC calls run on Tomcat's pool of platform threads, as its requests do. */
class BlockingGrpcTest extends GrpcContract {
    BlockingGrpcTest() {
        super("java-tomcat-blocking", Main.MODEL, thread -> thread.getName().startsWith("http-exec-"),
                "a thread of Tomcat's pool");
    }
}
