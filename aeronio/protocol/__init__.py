"""Aeron wire protocol: channel URIs, frame headers and flyweights."""
