package serverlab.grpc;

import com.google.protobuf.ByteString;
import io.grpc.Status;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import serverlab.core.ApiException;
import serverlab.core.ControlApi;
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
 * The service {@code serverlab.v1.Lab} of spec §16 on grpc-java, whatever transport serves it.
 * grpc-java's defaults are the spec's: a 4 MiB receive limit (RESOURCE_EXHAUSTED above it),
 * UNIMPLEMENTED for unknown methods and services, {@code grpc-timeout} as the call's deadline
 * (DEADLINE_EXCEEDED), INTERNAL for a message that does not decode. No method blocks: each
 * answers, or hands its stream to core's push, and returns.
 */
public final class LabService extends LabGrpc.LabImplBase {
    private static final PerfReply PERF = PerfReply.newBuilder().setBody(ByteString.copyFrom(Perf.body())).build();

    private final RequestManager manager;

    public LabService(ControlApi control) {
        this.manager = control.requestManager();
        control.counters().serveGrpc();
    }

    @Override
    public void perf(PerfRequest request, StreamObserver<PerfReply> reply) {
        reply.onNext(PERF);
        reply.onCompleted();
    }

    @Override
    public void echo(EchoMessage message, StreamObserver<EchoMessage> reply) {
        reply.onNext(message);
        reply.onCompleted();
    }

    /**
     * A subscriber of its events beside every other transport's (one snapshot spans them all,
     * §6) from the moment its request is read, until its deadline or its cancellation.
     */
    @Override
    public void subscribe(SubscribeRequest request, StreamObserver<Delivery> deliveries) {
        PushSpec spec;
        try {
            spec = PushSpec.grpc(request.getEventsList());
        } catch (ApiException refused) {
            deliveries.onError(Status.INVALID_ARGUMENT.withDescription(refused.getMessage()).asRuntimeException());
            return;
        }
        new SubscribeStream((ServerCallStreamObserver<Delivery>) deliveries).open(manager, spec);
    }

    /** Every message is sent back as soon as it is read; the client's end ends the call OK. */
    @Override
    public StreamObserver<EchoMessage> chat(StreamObserver<EchoMessage> replies) {
        return new StreamObserver<>() {
            @Override
            public void onNext(EchoMessage message) {
                replies.onNext(message);
            }

            @Override
            public void onError(Throwable cancelled) {
                // The call is over (cancelled or past its deadline): nothing more may be sent.
            }

            @Override
            public void onCompleted() {
                replies.onCompleted();
            }
        };
    }
}
