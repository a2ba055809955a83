# frozen_string_literal: true

module ServerlabEM
  # Where a request body ends (spec §1.1, RFC 9112 §6): read from the raw head,
  # because Thin's parser keeps only the last of repeated fields and so would
  # hide a second Content-Length or Transfer-Encoding line. A framing two
  # parsers could read differently raises BodyError; the connection answers it
  # and closes.
  module Framing
    # length: a Content-Length body; chunked: the chunked coding; close: both
    # fields came, so the connection closes after the answer (RFC 9112 §6.1).
    Result = Struct.new(:length, :chunked, :close)
    NONE = Result.new(nil, false, false).freeze
    MAX_LENGTH = 2**62

    module_function

    def of(head, http10)
      lengths, codings = fields(head)
      return chunked(codings, http10, close: !lengths.empty?) unless codings.empty?
      return NONE if lengths.empty?

      Result.new(content_length(lengths), false, false)
    end

    # The comma-separated elements of every Content-Length and
    # Transfer-Encoding line, without their optional whitespace.
    def fields(head)
      lengths = []
      codings = []
      head.split("\r\n").drop(1).each do |line|
        name, value = line.split(":", 2)
        next unless value

        if name.casecmp?("content-length")
          lengths.concat(elements(value))
        elsif name.casecmp?("transfer-encoding")
          codings.concat(elements(value).map(&:downcase))
        end
      end
      [lengths, codings]
    end

    def elements(value)
      value.split(",", -1).map { |item| item.strip }
    end

    def chunked(codings, http10, close:)
      raise BodyError.new(400, "transfer-encoding in an http/1.0 request") if http10
      raise BodyError.new(400, "chunked is not the final transfer coding") unless codings.last == "chunked"
      raise BodyError.new(400, "chunked applied more than once") if codings[0...-1].include?("chunked")
      raise BodyError.new(501, "unknown transfer coding") if codings.size > 1

      Result.new(nil, true, close)
    end

    def content_length(values)
      raise BodyError.new(400, "malformed content-length") unless values.all? { |v| v.match?(/\A\d+\z/) }

      lengths = values.map(&:to_i).uniq
      raise BodyError.new(400, "differing content-length values") if lengths.size > 1
      raise BodyError.new(400, "content-length too large") if lengths.first >= MAX_LENGTH

      lengths.first
    end
  end
end
