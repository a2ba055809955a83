package serverlab.netty;

import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelPipeline;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.handler.codec.TooLongFrameException;
import io.netty.handler.codec.http.DefaultFullHttpRequest;
import io.netty.handler.codec.http.EmptyHttpHeaders;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpServerExpectContinueHandler;
import io.netty.handler.codec.http.websocketx.BinaryWebSocketFrame;
import io.netty.handler.codec.http.websocketx.CloseWebSocketFrame;
import io.netty.handler.codec.http.websocketx.CorruptedWebSocketFrameException;
import io.netty.handler.codec.http.websocketx.PingWebSocketFrame;
import io.netty.handler.codec.http.websocketx.PongWebSocketFrame;
import io.netty.handler.codec.http.websocketx.TextWebSocketFrame;
import io.netty.handler.codec.http.websocketx.Utf8FrameValidator;
import io.netty.handler.codec.http.websocketx.WebSocketDecoderConfig;
import io.netty.handler.codec.http.websocketx.WebSocketFrame;
import io.netty.handler.codec.http.websocketx.WebSocketFrameAggregator;
import io.netty.handler.codec.http.websocketx.WebSocketServerHandshaker13;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import serverlab.core.ControlApi;
import serverlab.core.Stats;
import serverlab.core.WebSocketSession;

/**
 * One WebSocket connection (spec §11) with Netty's own codec: its RFC 6455 decoder (masking,
 * RSV bits, opcodes, control frames: 1002; a frame over 64 KiB: 1009), UTF-8 validator (1007)
 * and frame aggregator (a message over 64 KiB: 1009). Messages go to the shared
 * {@link WebSocketSession}. Everything it sends, replies and emitters' deliveries alike,
 * reaches the channel's event loop as a task, so messages go out in the order they were sent;
 * the loop makes a delivery's bytes (its {@code sent}) right before writing them.
 */
final class WebSocketConnection extends SimpleChannelInboundHandler<WebSocketFrame>
        implements WebSocketSession.Connection {
    /** After our close frame, how long the client has to answer it before TCP closes. */
    private static final long CLOSE_LINGER_MS = 1000;
    /** No extensions (so no RSV bits), masked client frames only; violations come to us. */
    private static final WebSocketDecoderConfig DECODER = WebSocketDecoderConfig.newBuilder()
            .maxFramePayloadLength(WebSocketSession.MAX_MESSAGE).allowExtensions(false).expectMaskedFrames(true)
            .allowMaskMismatch(false).closeOnProtocolViolation(false).build();

    private final Stats stats;
    private final WebSocketSession messages;
    private final Channel channel;
    /** A close frame went out: nothing is sent after it. Written on the event loop only. */
    private volatile boolean closing;

    private WebSocketConnection(ControlApi control, Channel channel) {
        this.stats = control.counters();
        this.channel = channel;
        this.messages = new WebSocketSession(control, this);
    }

    /**
     * Answers a checked upgrade request with 101 and replaces the HTTP handler at {@code ctx}
     * with a WebSocket connection. The handshaker puts its frame codec before the HTTP codec
     * and removes the HTTP codec once the 101 is out.
     */
    static void upgrade(ChannelHandlerContext ctx, HttpRequest request, ControlApi control) {
        Channel channel = ctx.channel();
        ChannelPipeline pipeline = ctx.pipeline();
        WebSocketConnection connection = new WebSocketConnection(control, channel);
        pipeline.remove(HttpServerExpectContinueHandler.class);
        pipeline.addBefore(ctx.name(), "ws-utf8", new Utf8FrameValidator(false));
        pipeline.addBefore(ctx.name(), "ws-aggregator", new WebSocketFrameAggregator(WebSocketSession.MAX_MESSAGE));
        pipeline.replace(ctx.name(), "ws", connection);
        control.counters().webSocketOpened();
        new WebSocketServerHandshaker13(request.uri(), null, DECODER).handshake(channel,
                new DefaultFullHttpRequest(request.protocolVersion(), request.method(), request.uri(),
                        Unpooled.EMPTY_BUFFER, request.headers(), EmptyHttpHeaders.INSTANCE));
    }

    @Override
    protected void channelRead0(ChannelHandlerContext ctx, WebSocketFrame frame) {
        if (frame instanceof CloseWebSocketFrame) {
            answerClose(ctx, (CloseWebSocketFrame) frame);
        } else if (closing) {
            return; // only the client's close is awaited now
        } else if (frame instanceof TextWebSocketFrame) {
            messages.onText(((TextWebSocketFrame) frame).text());
        } else if (frame instanceof BinaryWebSocketFrame) {
            messages.onBinary();
        } else if (frame instanceof PingWebSocketFrame) {
            ctx.writeAndFlush(new PongWebSocketFrame(frame.content().retain()));
        }
    }

    /** The client's close: answered with its code (none if it had none), then TCP closes. */
    private void answerClose(ChannelHandlerContext ctx, CloseWebSocketFrame frame) {
        if (closing) {
            ctx.close();
            return;
        }
        closing = true;
        int code = frame.statusCode();
        CloseWebSocketFrame answer = code < 0 ? new CloseWebSocketFrame() : new CloseWebSocketFrame(code, null);
        ctx.writeAndFlush(answer).addListener(ChannelFutureListener.CLOSE);
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        if (cause instanceof CorruptedWebSocketFrameException) {
            CorruptedWebSocketFrameException corrupt = (CorruptedWebSocketFrameException) cause;
            close(corrupt.closeStatus().code(), corrupt.closeStatus().reasonText());
        } else if (cause instanceof TooLongFrameException) {
            close(WebSocketSession.MESSAGE_TOO_BIG, "a message is at most 65536 bytes");
        } else {
            ctx.close(); // a reset or broken connection
        }
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) throws Exception {
        stats.webSocketClosed();
        messages.closed();
        super.channelInactive(ctx);
    }

    @Override
    public boolean send(Supplier<byte[]> message) {
        if (closing || !channel.isActive()) {
            return false;
        }
        channel.eventLoop().execute(() -> {
            if (!closing) {
                channel.writeAndFlush(new TextWebSocketFrame(Unpooled.wrappedBuffer(message.get())));
            }
        });
        return true;
    }

    /**
     * Our close frame, behind every message sent before it; TCP closes when the client answers
     * or {@link #CLOSE_LINGER_MS} later (after a framing error the decoder reads nothing more).
     */
    @Override
    public void close(int code, String reason) {
        channel.eventLoop().execute(() -> {
            if (closing || !channel.isActive()) {
                return;
            }
            closing = true;
            channel.writeAndFlush(new CloseWebSocketFrame(code, reason));
            channel.eventLoop().schedule(() -> {
                channel.close();
            }, CLOSE_LINGER_MS, TimeUnit.MILLISECONDS);
        });
    }
}
