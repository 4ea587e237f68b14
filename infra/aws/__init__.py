"""AWS adapters behind the engine's ports: DynamoDB stores, S3 embeddings, the local moto stack."""
