"""The broker: asyncio server, API handlers, partition logs and the group coordinator."""
