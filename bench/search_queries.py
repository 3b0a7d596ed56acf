"""Natural queries over the three public skill collections (anthropics/skills,
obra/superpowers, openai/skills), written for this benchmark before the ranking was tuned.
Only the queries and the expected skill names are here; the collections are read from disk
when present and never copied into the repository."""

PUBLIC_QUERIES = """
draw some generative art with code	algorithmic-art
make a flow field animation with random seeds	algorithmic-art
i want particles moving around in p5	algorithmic-art
let's bounce some ideas around before we build this	brainstorming
help me figure out what this new feature should do before coding	brainstorming
we should think through the design of the settings page first	brainstorming
make this doc look like anthropic's branding	brand-guidelines
what colours and fonts does our company style use	brand-guidelines
design a poster for the conference	canvas-design
create a static piece of visual art as a png	canvas-design
which claude model id should i use and how much does it cost	claude-api
how do i stream responses from the anthropic sdk	claude-api
set up prompt caching in my api calls	claude-api
write up a short plan for this refactor	create-plan
i've got four unrelated bugs, can several agents work on them at once	dispatching-parallel-agents
split these independent tasks between parallel workers	dispatching-parallel-agents
help me write a design doc with me	doc-coauthoring
draft a technical spec together with me	doc-coauthoring
write a proposal document section by section	doc-coauthoring
edit a word file and keep tracked changes	docx
produce a .docx report with headings and a table of contents	docx
carry out the plan we wrote in another session	executing-plans
go through the implementation plan step by step with checkpoints	executing-plans
i'm done with the feature, should i merge or open a pr	finishing-a-development-branch
wrap up my branch now that tests pass	finishing-a-development-branch
make the landing page look less generic	frontend-design
pick typography and an aesthetic for a new ui	frontend-design
reply to the review comments on my pull request	gh-address-comments
work through the reviewer's comments on the open pr with gh	gh-address-comments
github actions are red on my pr, fix it	gh-fix-ci
the ci checks keep failing, look at the logs	gh-fix-ci
write a status update for leadership	internal-comms
draft the weekly company newsletter	internal-comms
create a ticket in linear for this bug	linear
update the issues in our linear project	linear
build an mcp server that wraps a third party api	mcp-builder
expose my service to llms as tools over model context protocol	mcp-builder
save what we decided in this chat to our notion wiki	notion-knowledge-capture
turn these notes into a faq page in notion	notion-knowledge-capture
prepare an agenda for tomorrow's meeting using notion	notion-meeting-intelligence
get pre-read materials ready for the attendees	notion-meeting-intelligence
research a topic across our notion pages and write a brief with citations	notion-research-documentation
compare options from several notion sources into a report	notion-research-documentation
turn the prd in notion into implementation tasks	notion-spec-to-implementation
track progress on a feature spec from notion	notion-spec-to-implementation
pull the tables out of this pdf	pdf
merge two pdfs and rotate a page	pdf
fill out a pdf form	pdf
make a slide deck for the pitch	pptx
extract the text from a powerpoint file	pptx
someone reviewed my code and i'm not sure their suggestions are right	receiving-code-review
how should i respond to feedback on my changes	receiving-code-review
ask for a code review before merging	requesting-code-review
get someone to check my work before i merge	requesting-code-review
install a skill from a github repo	skill-installer
list the skills i can install	skill-installer
make a gif for slack of a cat waving	slack-gif-creator
animated emoji for our slack workspace	slack-gif-creator
run each task of the plan with a fresh subagent and review in between	subagent-driven-development
use subagents to implement the plan in this session	subagent-driven-development
my test keeps failing and i don't know why	systematic-debugging
find the root cause of this weird bug	systematic-debugging
something broke and i can't figure out what	systematic-debugging
write the tests first then the code	test-driven-development
red green refactor for this bugfix	test-driven-development
apply a ready-made colour theme to my slides	theme-factory
style this html page with one of the preset themes	theme-factory
work on a second branch without messing up my checkout	using-git-worktrees
set up an isolated workspace for a new feature	using-git-worktrees
how do i find and use the skills i have	using-superpowers
make sure it actually works before saying it's done	verification-before-completion
run the checks before claiming the fix works	verification-before-completion
build a react artifact with tailwind and shadcn	web-artifacts-builder
a multi-component html artifact with routing and state	web-artifacts-builder
test my local web app in a browser with playwright	webapp-testing
take screenshots of my frontend and read the console logs	webapp-testing
turn the spec into a detailed multi-step implementation plan	writing-plans
write a plan before touching any code	writing-plans
create a new skill and check it works	writing-skills
edit an existing skill so agents follow it	writing-skills
add a column with formulas to this spreadsheet	xlsx
clean up a csv file and chart it in excel	xlsx
"""
