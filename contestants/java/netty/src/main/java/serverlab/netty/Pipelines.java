package serverlab.netty;

import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelPipeline;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.codec.http.HttpServerExpectContinueHandler;
import io.netty.handler.codec.http2.Http2FrameCodecBuilder;
import io.netty.handler.codec.http2.Http2MultiplexHandler;
import io.netty.handler.codec.http2.Http2Settings;
import io.netty.handler.codec.http2.Http2StreamFrameToHttpObjectCodec;
import io.netty.handler.ssl.ApplicationProtocolNames;
import io.netty.handler.ssl.ApplicationProtocolNegotiationHandler;
import io.netty.handler.stream.ChunkedWriteHandler;
import serverlab.core.ControlApi;
import serverlab.core.DocRoot;

/**
 * The handlers behind a connection: HTTP/1.1, and HTTP/2 (spec §13, §14) as Netty's frame
 * codec with one child channel per stream, each carrying the HTTP/1.1 handler on HTTP
 * objects converted from its frames.
 */
final class Pipelines {
    private static final int MAX_INITIAL_LINE = 16 * 1024;
    /** Spec §8: header sections up to 64 KiB are read; larger ones get 431. */
    private static final int MAX_HEADER_SIZE = 64 * 1024;
    private static final int MAX_CHUNK_SIZE = 64 * 1024;
    /** SETTINGS_MAX_CONCURRENT_STREAMS as shipped: the spec wants 100 to 1000 (§13). */
    static final int H2_STREAMS = 250;
    /** RST_STREAM frames a connection may send per window before GOAWAY: Netty's default. */
    static final int H2_RESETS = 200;
    static final int H2_RESET_WINDOW_S = 30;

    /**
     * The mitigations a tunable sets (suites/abuse.toml's hardened runs), each as shipped
     * by default: the stream limit, the reset rate limit (Netty's
     * decoderEnforceMaxRstFramesPerWindow, against Rapid Reset) and a request head's
     * deadline ({@link HeaderTimeout}; 0: none, as shipped).
     */
    record Hardening(int maxStreams, int maxResets, int resetWindowS, long headerTimeoutMs) {
        static final Hardening SHIPPED = new Hardening(H2_STREAMS, H2_RESETS, H2_RESET_WINDOW_S, 0);
    }

    private final ControlApi control;
    private final DocRoot docRoot;
    private final Hardening hardening;

    Pipelines(ControlApi control, DocRoot docRoot, Hardening hardening) {
        this.control = control;
        this.docRoot = docRoot;
        this.hardening = hardening;
    }

    /** HTTP/1.1; {@code chunked}: files go as chunks (TLS, where sendfile cannot reach). */
    void http1(ChannelPipeline pipeline, boolean chunked) {
        pipeline.addLast(new HttpServerCodec(MAX_INITIAL_LINE, MAX_HEADER_SIZE, MAX_CHUNK_SIZE));
        if (hardening.headerTimeoutMs() > 0) {
            pipeline.addLast(new HeaderTimeout(hardening.headerTimeoutMs()));
        }
        pipeline.addLast(new HttpServerExpectContinueHandler());
        if (chunked) {
            pipeline.addLast(new ChunkedWriteHandler());
        }
        pipeline.addLast(new HttpHandler(control, docRoot));
    }

    /** HTTP/2 from the connection preface on: h2 after ALPN, or h2c with prior knowledge. */
    void http2(ChannelPipeline pipeline) {
        Http2Settings settings = Http2Settings.defaultSettings().maxConcurrentStreams(hardening.maxStreams());
        pipeline.addLast(Http2FrameCodecBuilder.forServer().initialSettings(settings)
                        .decoderEnforceMaxRstFramesPerWindow(hardening.maxResets(), hardening.resetWindowS()).build(),
                new Http2MultiplexHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel stream) {
                        stream.pipeline().addLast(new MalformedRequests(),
                                new Http2StreamFrameToHttpObjectCodec(true),
                                new ChunkedWriteHandler(), new HttpHandler(control, docRoot));
                    }
                }));
    }

    /** After the TLS handshake: h2 or HTTP/1.1, as ALPN chose. */
    ApplicationProtocolNegotiationHandler byAlpn() {
        return new ApplicationProtocolNegotiationHandler(ApplicationProtocolNames.HTTP_1_1) {
            @Override
            protected void configurePipeline(ChannelHandlerContext ctx, String protocol) {
                if (ApplicationProtocolNames.HTTP_2.equals(protocol)) {
                    http2(ctx.pipeline());
                } else {
                    http1(ctx.pipeline(), true);
                }
            }
        };
    }
}
