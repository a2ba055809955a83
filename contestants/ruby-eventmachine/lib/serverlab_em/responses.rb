# frozen_string_literal: true

require "json"

module ServerlabEM
  # Builds HTTP/1.1 response heads; every response carries Date, Content-Type
  # and a length or chunked framing.
  module Responses
    REASONS = {
      100 => "Continue", 200 => "OK", 400 => "Bad Request", 403 => "Forbidden",
      404 => "Not Found", 405 => "Method Not Allowed", 413 => "Content Too Large",
      426 => "Upgrade Required", 431 => "Request Header Fields Too Large", 500 => "Internal Server Error",
      501 => "Not Implemented"
    }.freeze
    STATUS_LINES = REASONS.to_h { |code, reason| [code, "HTTP/1.1 #{code} #{reason}\r\n".freeze] }.freeze
    JSON_TYPE = "application/json"
    CONTINUE = "HTTP/1.1 100 Continue\r\n\r\n"

    module_function

    def head(status, content_type, framing, extra_headers)
      "#{STATUS_LINES.fetch(status)}Date: #{HttpDate.current}\r\n" \
        "Content-Type: #{content_type}\r\n#{framing}#{extra_headers}\r\n"
    end

    def fixed_length(status, content_type, body_size, extra_headers = nil)
      head(status, content_type, "Content-Length: #{body_size}\r\n", extra_headers)
    end

    def chunked(status, content_type, extra_headers = nil)
      head(status, content_type, "Transfer-Encoding: chunked\r\n", extra_headers)
    end

    def error_body(reason)
      JSON.generate("error" => reason)
    end

    # One chunk of a chunked body, as a single string so that one send_data
    # (one flush) carries a whole line.
    def chunk(data)
      "#{data.bytesize.to_s(16)}\r\n#{data}\r\n"
    end

    LAST_CHUNK = "0\r\n\r\n"
  end
end
