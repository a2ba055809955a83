package serverlab.netty;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.DateFormatter;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.DefaultHttpResponse;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpHeaders;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpVersion;
import java.util.Date;
import serverlab.core.ApiException;
import serverlab.core.Json;

/** Building responses with the headers every answer carries (spec §1). */
final class HttpResponses {
    private static volatile CachedDate cachedDate = new CachedDate(0, "");

    private HttpResponses() {
    }

    /** The Date header changes once a second; formatting it per response would be waste. */
    private record CachedDate(long second, String value) {
    }

    static String date() {
        long second = System.currentTimeMillis() / 1000;
        CachedDate cached = cachedDate;
        if (cached.second() != second) {
            cached = new CachedDate(second, DateFormatter.format(new Date(second * 1000)));
            cachedDate = cached;
        }
        return cached.value();
    }

    static FullHttpResponse full(HttpResponseStatus status, CharSequence contentType, ByteBuf body) {
        FullHttpResponse response = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, status, body, false);
        HttpHeaders headers = response.headers();
        headers.set(HttpHeaderNames.DATE, date());
        headers.set(HttpHeaderNames.CONTENT_TYPE, contentType);
        headers.setInt(HttpHeaderNames.CONTENT_LENGTH, body.readableBytes());
        return response;
    }

    static FullHttpResponse json(byte[] body) {
        return full(HttpResponseStatus.OK, Json.CONTENT_TYPE, Unpooled.wrappedBuffer(body));
    }

    static FullHttpResponse error(ApiException error) {
        FullHttpResponse response = full(HttpResponseStatus.valueOf(error.status()), Json.CONTENT_TYPE,
                Unpooled.wrappedBuffer(error.body()));
        if (error.headerName() != null) {
            response.headers().set(error.headerName(), error.headerValue());
        }
        return response;
    }

    /** A response whose body follows: a file of known length, or a chunked stream when length < 0. */
    static HttpResponse head(CharSequence contentType, long length) {
        HttpResponse response = new DefaultHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.OK);
        HttpHeaders headers = response.headers();
        headers.set(HttpHeaderNames.DATE, date());
        headers.set(HttpHeaderNames.CONTENT_TYPE, contentType);
        if (length >= 0) {
            headers.set(HttpHeaderNames.CONTENT_LENGTH, length);
        } else {
            headers.set(HttpHeaderNames.TRANSFER_ENCODING, HttpHeaderValues.CHUNKED);
        }
        return response;
    }

    /** Closes after the write unless the connection is kept alive. */
    static void closeUnlessKeptAlive(ChannelFuture written, boolean keepAlive) {
        if (!keepAlive) {
            written.addListener(ChannelFutureListener.CLOSE);
        }
    }

    static void markConnection(HttpResponse response, boolean keepAlive) {
        if (!keepAlive) {
            response.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
        }
    }

    static ChannelFuture send(ChannelHandlerContext ctx, HttpResponse response, boolean keepAlive) {
        markConnection(response, keepAlive);
        ChannelFuture written = ctx.writeAndFlush(response);
        closeUnlessKeptAlive(written, keepAlive);
        return written;
    }
}
