package serverlab.tomcatasync;

import serverlab.tomcat.GrpcContract;

/** gRPC calls run on the container thread that read them: Tomcat's own pool, no other. */
class AsyncGrpcTest extends GrpcContract {
    AsyncGrpcTest() {
        super("java-tomcat-async", Main.MODEL, thread -> thread.getName().startsWith("http-exec-"),
                "a thread of Tomcat's pool");
    }
}
