"""Empty rounds over a Flower deployment: the per-round cost of Flower itself.

The ServerApp waits for ``nodes`` SuperNodes, then runs ``rounds`` rounds of one
empty ``query`` message to each and the empty replies, through Flower's grid
(or fedcluster's PromptGrid with ``prompt = true``), and logs each round's time.
"""

import time
from logging import INFO

from flwr.app import Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.common.logger import log
from flwr.serverapp import Grid, ServerApp

server_app = ServerApp()
client_app = ClientApp()


@client_app.query()
def answer(msg: Message, context: Context) -> Message:
    return Message(RecordDict(), reply_to=msg)


@server_app.main()
def main(grid: Grid, context: Context) -> None:
    rounds = int(context.run_config["rounds"])
    wanted = int(context.run_config["nodes"])
    if context.run_config["prompt"]:
        from fedcluster.server.flower import PromptGrid

        grid = PromptGrid(grid)
    while len(nodes := sorted(grid.get_node_ids())) < wanted:
        time.sleep(0.5)
    for r in range(1, rounds + 1):
        started = time.perf_counter()
        messages = [Message(RecordDict(), dst_node_id=n, message_type="query") for n in nodes]
        replies = list(grid.send_and_receive(messages, timeout=120))
        log(INFO, "bare round %d: %.3f s, %d replies", r, time.perf_counter() - started,
            len(replies))
