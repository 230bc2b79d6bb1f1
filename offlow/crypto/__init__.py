"""The partitioned-crypto case study's Python side: the reference of the seed's MD5 over
K interleaved chains (built on hashlib), and key tables for the CBC elements."""
