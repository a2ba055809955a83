package serverlab.virtualthreads;

import serverlab.tomcat.GrpcContract;

/** gRPC calls run on a new virtual thread per task, the architecture's point. */
class VirtualThreadsGrpcTest extends GrpcContract {
    VirtualThreadsGrpcTest() {
        super("java-virtual-threads", Main.MODEL, Thread::isVirtual, "a virtual thread");
    }
}
