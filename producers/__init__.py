"""What an app imports to publish chat turns to cuemem.

    from producers import Publisher
    pub = Publisher.from_env()
    pub.publish(user_id="u1", session_id="s1", role="user", content="我不吃香菜")

It imports nothing from ``workers``: tasks are sent by name.
"""

from producers.publisher import BatchResult, Published, Publisher

__all__ = ["BatchResult", "Published", "Publisher"]
