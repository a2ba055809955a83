package serverlab.netty;

import com.google.protobuf.ByteString;
import io.grpc.Status;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import serverlab.core.ApiException;
import serverlab.core.Perf;
import serverlab.core.PushSpec;
import serverlab.core.RequestManager;
import serverlab.v1.LabGrpc;
import serverlab.v1.Serverlab.Delivery;
import serverlab.v1.Serverlab.EchoMessage;
import serverlab.v1.Serverlab.PerfReply;
import serverlab.v1.Serverlab.PerfRequest;
import serverlab.v1.Serverlab.SubscribeRequest;

/**
 * The service of spec §16 ({@code serverlab.v1.Lab}) on grpc-java's generated base class.
 * The server runs it with a direct executor, so every method below runs on the event loop of
 * the call's connection. grpc-java's defaults are the spec's: a 4 MiB receive limit
 * (RESOURCE_EXHAUSTED above it), UNIMPLEMENTED for unknown methods and services, and
 * grpc-timeout as the call's deadline.
 */
final class LabService extends LabGrpc.LabImplBase {
    private static final PerfReply PERF = PerfReply.newBuilder().setBody(ByteString.copyFrom(Perf.body())).build();

    private final RequestManager manager;

    LabService(RequestManager manager) {
        this.manager = manager;
    }

    @Override
    public void perf(PerfRequest request, StreamObserver<PerfReply> reply) {
        reply.onNext(PERF);
        reply.onCompleted();
    }

    @Override
    public void echo(EchoMessage request, StreamObserver<EchoMessage> reply) {
        reply.onNext(request);
        reply.onCompleted();
    }

    /** Every message echoed as it is read; the client's end of its side ends the call OK. */
    @Override
    public StreamObserver<EchoMessage> chat(StreamObserver<EchoMessage> reply) {
        return new StreamObserver<>() {
            @Override
            public void onNext(EchoMessage message) {
                reply.onNext(message);
            }

            @Override
            public void onError(Throwable cancelled) {
                // The call is over (cancelled, deadline, connection gone): nothing to answer.
            }

            @Override
            public void onCompleted() {
                reply.onCompleted();
            }
        };
    }

    /** Holds the stream as a subscriber of its events beside every other transport's (§6). */
    @Override
    public void subscribe(SubscribeRequest request, StreamObserver<Delivery> stream) {
        PushSpec spec;
        try {
            spec = PushSpec.grpc(request.getEventsList());
        } catch (ApiException e) {
            stream.onError(Status.INVALID_ARGUMENT.withDescription(e.getMessage()).asRuntimeException());
            return;
        }
        new GrpcSubscription((ServerCallStreamObserver<Delivery>) stream, manager).start(spec);
    }
}
