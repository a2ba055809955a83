package serverlab.netty;

import com.fasterxml.jackson.databind.JsonNode;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.DefaultFileRegion;
import io.netty.channel.socket.SocketChannel;
import io.netty.handler.ssl.SslHandler;
import io.netty.handler.codec.http.HttpChunkedInput;
import io.netty.handler.stream.ChunkedFile;
import io.netty.handler.codec.DecoderResult;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpObject;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.handler.codec.http.QueryStringDecoder;
import io.netty.handler.codec.http.TooLongHttpHeaderException;
import io.netty.util.ReferenceCountUtil;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import serverlab.core.ApiException;
import serverlab.core.ControlApi;
import serverlab.core.DocRoot;
import serverlab.core.Endpoint;
import serverlab.core.Framing;
import serverlab.core.Json;
import serverlab.core.Loopback;
import serverlab.core.Perf;
import serverlab.core.PushSpec;
import serverlab.core.SseRequest;
import serverlab.core.SseStream;
import serverlab.core.UploadDigest;
import serverlab.core.WebSocketHandshake;

/**
 * One HTTP connection on its event loop: routes each request, streams request bodies (uploads
 * are hashed chunk by chunk, never aggregated) and answers. Nothing here blocks.
 */
final class HttpHandler extends ChannelInboundHandlerAdapter {
    /** Spec §12, §13: a file's chunk over TLS or HTTP/2, where sendfile cannot reach the socket. */
    private static final int FILE_CHUNK = 64 * 1024;
    /** Read-only and never released, so every /perf answer shares one direct buffer. */
    private static final ByteBuf PERF_BODY = Unpooled.unreleasableBuffer(
            Unpooled.directBuffer(Perf.body().length).writeBytes(Perf.body()).asReadOnly());

    private final ControlApi control;
    private final DocRoot docRoot;
    private final ResponseLog log;
    /** The request being read, and how its body is consumed (null: ignore the body). */
    private HttpRequest request;
    private Endpoint endpoint;
    private boolean keepAlive;
    private UploadDigest upload;
    private JsonBody json;
    /** Whether the request being read has its answer, and whether its body has ended. */
    private boolean answered;
    private boolean bodyEnded;
    /** A framing was refused (spec §1.1): nothing after it on this connection is served. */
    private boolean refused;
    /** The request is a valid WebSocket upgrade, done once its (empty) body has been read. */
    private boolean upgrade;

    HttpHandler(ControlApi control, DocRoot docRoot) {
        this.control = control;
        this.docRoot = docRoot;
        this.log = new ResponseLog(control);
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        try {
            if (refused) {
                return; // the decoder goes on with bytes already read; none of them is served
            }
            DecoderResult decoded = ((HttpObject) msg).decoderResult();
            if (decoded.isFailure()) {
                refuseUnparsable(ctx, decoded.cause());
                return;
            }
            if (msg instanceof HttpRequest) {
                onRequest(ctx, (HttpRequest) msg);
            }
            if (msg instanceof HttpContent) {
                onContent(ctx, (HttpContent) msg);
            }
        } catch (ApiException refused) {
            // A refusal in the middle of a body leaves the rest unread: close after answering.
            boolean midBody = upload != null || json != null;
            upload = null;
            json = null;
            answer(ctx, HttpResponses.error(refused), keepAlive && !midBody);
        } catch (IOException e) {
            answer(ctx, HttpResponses.error(new ApiException(500, "io error")), false);
        } finally {
            ReferenceCountUtil.release(msg);
        }
    }

    private void refuseUnparsable(ChannelHandlerContext ctx, Throwable cause) {
        if (answered && !bodyEnded) {
            ctx.close(); // a malformed body of a request answered already: no second answer
            return;
        }
        request = null; // nothing usable was read, so it is not counted as a request
        ApiException error = cause instanceof TooLongHttpHeaderException
                ? new ApiException(431, "request header fields too large")
                : ApiException.badRequest("malformed request");
        upload = null;
        json = null;
        answer(ctx, HttpResponses.error(error), false);
    }

    private void onRequest(ChannelHandlerContext ctx, HttpRequest received) throws IOException {
        control.counters().requestRead();
        request = received;
        keepAlive = HttpUtil.isKeepAlive(received);
        upload = null;
        json = null;
        answered = false;
        bodyEnded = false;
        upgrade = false;
        ApiException framing = Framing.refusal(received.headers().getAll(HttpHeaderNames.TRANSFER_ENCODING),
                received.protocolVersion().equals(HttpVersion.HTTP_1_0));
        if (framing != null) {
            refused = true;
            answer(ctx, HttpResponses.error(framing), false);
            return;
        }
        String uri = received.uri();
        int query = uri.indexOf('?');
        String path = query < 0 ? uri : uri.substring(0, query);
        endpoint = Endpoint.forPath(path);
        if (endpoint == null) {
            throw ApiException.notFound("unknown path");
        }
        endpoint.checkMethod(received.method().name());
        Loopback.check(endpoint, () -> ((InetSocketAddress) ctx.channel().remoteAddress()).getAddress().getHostAddress());
        long declaredLength = HttpUtil.getContentLength(received, -1L);
        switch (endpoint) {
            case PERF:
                answer(ctx, HttpResponses.full(HttpResponseStatus.OK, Perf.CONTENT_TYPE, PERF_BODY.duplicate()), keepAlive);
                break;
            case FILES:
                serveFile(ctx, path.substring(Endpoint.FILES.path().length()));
                break;
            case TIMESTAMP:
                List<String> client = new QueryStringDecoder(uri).parameters().get("client");
                answer(ctx, HttpResponses.json(control.timestamp(client == null ? null : client.get(0))), keepAlive);
                break;
            case STATS:
                answer(ctx, HttpResponses.json(control.stats()), keepAlive);
                break;
            case SSE:
                SseRequest sse = SseRequest.parse(query < 0 ? null : uri.substring(query + 1));
                Map<String, Long> lastEventId = SseStream.parseLastEventId(received.headers().get("Last-Event-ID"));
                new SseExchange(ctx, control, received, keepAlive).start(sse, lastEventId);
                answered = true;
                break;
            case WEBSOCKET:
                WebSocketHandshake.check(received.headers()::getAll);
                upgrade = true;
                break;
            case UPLOAD:
                UploadDigest.checkDeclaredLength(declaredLength);
                upload = new UploadDigest();
                break;
            default:
                Json.checkDeclaredLength(declaredLength);
                json = new JsonBody();
                break;
        }
    }

    private void onContent(ChannelHandlerContext ctx, HttpContent content) {
        if (content instanceof LastHttpContent) {
            bodyEnded = true;
        }
        ByteBuf data = content.content();
        if (upload != null) {
            for (ByteBuffer chunk : data.nioBuffers()) {
                upload.update(chunk);
            }
        } else if (json != null) {
            json.add(data);
        }
        if (!(content instanceof LastHttpContent)) {
            return;
        }
        if (upgrade) {
            log.responded(request, 101);
            answered = true;
            WebSocketConnection.upgrade(ctx, request, control);
        } else if (upload != null) {
            byte[] digest = upload.answer();
            upload = null;
            answer(ctx, HttpResponses.json(digest), keepAlive);
        } else if (json != null) {
            JsonNode body = json.parse();
            json = null;
            onJsonBody(ctx, body);
        }
    }

    private void onJsonBody(ChannelHandlerContext ctx, JsonNode body) {
        switch (endpoint) {
            case LOGGING:
                answer(ctx, HttpResponses.json(control.logging(body)), keepAlive);
                break;
            case EVENT_SET:
                answer(ctx, HttpResponses.json(control.eventSet(body)), keepAlive);
                break;
            case EVENT_CLEAR:
                answer(ctx, HttpResponses.json(control.eventClear(body)), keepAlive);
                break;
            default:
                new PushExchange(ctx, control, request, keepAlive).start(PushSpec.parse(body));
                break;
        }
    }

    private void serveFile(ChannelHandlerContext ctx, String rawPath) throws IOException {
        Path file = docRoot.resolve(rawPath);
        RandomAccessFile open = new RandomAccessFile(file.toFile(), "r");
        long length = open.length();
        HttpResponse head = HttpResponses.head(DocRoot.CONTENT_TYPE, length);
        HttpResponses.markConnection(head, keepAlive);
        log.responded(request, 200);
        ctx.write(head);
        ChannelFuture done;
        if (request.method().equals(HttpMethod.HEAD)) {
            open.close();
            done = ctx.writeAndFlush(LastHttpContent.EMPTY_LAST_CONTENT);
        } else if (!(ctx.channel() instanceof SocketChannel) || ctx.pipeline().get(SslHandler.class) != null) {
            // TLS, or an HTTP/2 stream: the file goes through the heap, as HTTP contents that
            // end with the last one, framed or encrypted on their way.
            done = ctx.writeAndFlush(new HttpChunkedInput(new ChunkedFile(open, 0, length, FILE_CHUNK)));
        } else {
            ctx.write(new DefaultFileRegion(open.getChannel(), 0, length)); // zero-copy sendfile
            done = ctx.writeAndFlush(LastHttpContent.EMPTY_LAST_CONTENT);
        }
        HttpResponses.closeUnlessKeptAlive(done, keepAlive);
    }

    private void answer(ChannelHandlerContext ctx, HttpResponse response, boolean keepOpen) {
        // Counted before the write: once the client has the answer, /stats (served by
        // another event loop) must already include it.
        log.responded(request, response.status().code());
        answered = true;
        HttpResponses.send(ctx, response, keepOpen);
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        ctx.close(); // a reset or broken connection; the server goes on
    }

    /** A JSON request body, collected up to the spec's 64 KiB limit. */
    private static final class JsonBody {
        private byte[] bytes = new byte[256];
        private int length;

        void add(ByteBuf data) {
            int n = data.readableBytes();
            if (length + n > Json.MAX_BODY) {
                throw Json.tooLarge();
            }
            if (length + n > bytes.length) {
                bytes = java.util.Arrays.copyOf(bytes, Math.max(bytes.length * 2, length + n));
            }
            data.readBytes(bytes, length, n);
            length += n;
        }

        JsonNode parse() {
            return Json.parse(bytes, 0, length);
        }
    }
}
