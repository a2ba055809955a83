package serverlab.netty;

import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http2.DefaultHttp2ResetFrame;
import io.netty.handler.codec.http2.Http2Error;
import io.netty.handler.codec.http2.Http2Headers;
import io.netty.handler.codec.http2.Http2HeadersFrame;

/**
 * Spec §13, RFC 9113 §8.1.1 and §8.3.1: a request without {@code :method}, or (but for
 * CONNECT) without {@code :scheme} or {@code :path}, is malformed and answered with RST_STREAM
 * PROTOCOL_ERROR. Netty's frame codec passes such a header block on: its HTTP conversion then
 * left the stream open and unanswered (no {@code :method}), cancelled it (no {@code :path}) or
 * served it (no {@code :scheme}). One per stream, before the conversion.
 */
final class MalformedRequests extends ChannelInboundHandlerAdapter {
    private boolean first = true;

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        if (first && msg instanceof Http2HeadersFrame) {
            first = false;
            if (malformed(((Http2HeadersFrame) msg).headers())) {
                ctx.writeAndFlush(new DefaultHttp2ResetFrame(Http2Error.PROTOCOL_ERROR));
                return;
            }
        }
        ctx.fireChannelRead(msg);
    }

    private static boolean malformed(Http2Headers headers) {
        if (headers.method() == null) {
            return true;
        }
        boolean connect = HttpMethod.CONNECT.asciiName().contentEquals(headers.method());
        return !connect && (headers.scheme() == null || headers.path() == null);
    }
}
